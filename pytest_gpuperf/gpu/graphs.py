"""CUDA graph mode: capture the measured function once, time its replays (no launch overhead).

The rules of capture are checked or explained here: every tensor on the GPU,
shapes frozen at capture, and no waiting for the GPU inside the function.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.errors import ConfigError, GraphCaptureError

if TYPE_CHECKING:
    import torch

DEFAULT_WARMUP_ITERS = 3  # cuBLAS/cuDNN pick algorithms and allocate workspaces on the first calls

# Substrings of capture failures and what they mean for the user's function.
_SYNC_HINT = (
    "the function synchronizes with the host during capture (.item(), .cpu(), .tolist(), "
    "printing a tensor, torch.cuda.synchronize(), or an op with a data-dependent output shape "
    "such as nonzero() or boolean-mask indexing); move that out of the measured function"
)
_CAUSES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("not permitted when stream is capturing", "operation not permitted"), _SYNC_HINT),
    (("capture_invalidated", "capture invalidated", "cudaErrorStreamCaptureInvalidated"), _SYNC_HINT),
    (
        ("capture_unsupported", "cudaErrorStreamCaptureUnsupported", "is not supported during capture"),
        "an operation in the function cannot be captured (a host synchronization, a pinned-memory "
        "copy, or a library call that is not graph-safe)",
    ),
    (
        ("capture_implicit", "cudaErrorStreamCaptureImplicit", "legacy stream"),
        "work was queued on the legacy default stream during capture; use torch streams only",
    ),
    (
        ("unjoined", "cudaErrorStreamCaptureUnjoined"),
        "a side stream forked during capture was not joined back (wait_stream) before it ended",
    ),
)


def capture(
    fn: Callable[..., object],
    args: Sequence[object],
    kwargs: Mapping[str, object],
    device: torch.device,
    *,
    warmup_iters: int = DEFAULT_WARMUP_ITERS,
) -> Callable[[], object]:
    """Warm ``fn`` up on a side stream, capture one call, and return a replay callable.

    A replay returns the captured call's output tensors, overwritten in place.
    Errors ``fn`` raises during warm-up propagate unchanged: they are its own bugs.
    """
    if device.type != "cuda":
        raise ConfigError(f"cuda_graph=True needs a CUDA device; this measurement runs on {device}")
    import torch

    _check_tensors_on(device, args, kwargs, fn)
    call_kwargs = dict(kwargs)
    with torch.cuda.device(device):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup_iters):
                fn(*args, **call_kwargs)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize(device)

        graph = torch.cuda.CUDAGraph()
        rng_backup = _rng_backup(device)
        try:
            # Our side stream: torch.cuda.graph's default one lives on whichever device was current first.
            with torch.cuda.graph(graph, stream=side):
                static_output = fn(*args, **call_kwargs)
        except Exception as exc:
            _restore_rng(device, rng_backup)
            raise GraphCaptureError(_explain(fn, exc), function=_name(fn)) from exc
        _check_outputs_on(device, static_output, fn)

    def replay() -> object:
        graph.replay()
        return static_output

    return replay


def _rng_backup(device: torch.device) -> torch.Generator | None:
    """A copy of the device's default RNG state, taken before a capture.

    A failed capture leaves the default CUDA generator in capture mode (torch 2.11),
    so every later random op on that GPU would raise: one bad test would break the rest.
    """
    import torch

    generator = torch.cuda.default_generators[device.index or 0]
    clone = getattr(generator, "clone_state", None)
    return clone() if clone is not None else None


def _restore_rng(device: torch.device, backup: torch.Generator | None) -> None:
    import torch

    if backup is None:
        return
    generator = torch.cuda.default_generators[device.index or 0]
    # If even this fails nothing more can be done here; the capture error is what gets reported.
    with contextlib.suppress(RuntimeError):
        generator.graphsafe_set_state(backup)


def _name(fn: Callable[..., object]) -> str:
    return getattr(fn, "__qualname__", repr(fn))


def _explain(fn: Callable[..., object], exc: BaseException) -> str:
    text = str(exc)
    name = _name(fn)
    for needles, cause in _CAUSES:
        if any(n.lower() in text.lower() for n in needles):
            return f"CUDA graph capture of {name} failed: {cause}. Underlying error: {text.strip()}"
    return (
        f"CUDA graph capture of {name} failed: {type(exc).__name__}: {text.strip()}. "
        "Graphs need GPU-only work with fixed shapes and no host synchronization; "
        "measure without cuda_graph=True to check the function itself"
    )


def _tensors(value: object, path: str) -> Iterator[tuple[str, Any]]:
    """Every tensor inside nested tuples, lists and dicts, with where it was found."""
    import torch

    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{path}[{i}]")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _tensors(item, f"{path}[{key!r}]")


def _check_tensors_on(
    device: torch.device, args: Sequence[object], kwargs: Mapping[str, object], fn: Callable[..., object]
) -> None:
    # A CPU tensor's work would run once during capture and never on replay: refuse it.
    found = [*_tensors(tuple(args), "args"), *_tensors(dict(kwargs), "kwargs")]
    for where, tensor in found:
        if tensor.device.type != "cuda":
            raise GraphCaptureError(
                f"CUDA graph capture needs every tensor argument on the GPU; {where} is on "
                f"{tensor.device} (its work would run once at capture and never on replay)",
                function=_name(fn),
                where=where,
            )
        if tensor.device.index is not None and device.index is not None and tensor.device != device:
            raise GraphCaptureError(
                f"CUDA graph capture on {device}: {where} is on {tensor.device}; a graph replays on one device",
                function=_name(fn),
                where=where,
            )


def _check_outputs_on(device: torch.device, output: object, fn: Callable[..., object]) -> None:
    for where, tensor in _tensors(output, "output"):
        if tensor.device.type != "cuda":
            name = _name(fn)
            raise GraphCaptureError(
                f"CUDA graph capture of {name}: {where} is a {tensor.device} tensor, so the function "
                "did CPU work that replay would skip; return GPU tensors only",
                function=name,
                where=where,
            )
