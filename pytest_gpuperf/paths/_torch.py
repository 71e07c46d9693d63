"""Small torch utilities the path helpers share (torch is imported by the caller's need)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from pytest_gpuperf.gpu.device import cuda_synchronize
from pytest_gpuperf.model import Measurement
from pytest_gpuperf.paths import Bench


def elapsed_ns(fn: Callable[[], object], device: torch.device) -> float:
    """The wall time of one ``fn()`` in nanoseconds, the device work it queued included."""
    cuda_synchronize(device)
    start = time.perf_counter_ns()
    fn()
    cuda_synchronize(device)
    return float(time.perf_counter_ns() - start)


def record_speedup(
    bench: Bench, before: Measurement, after: Measurement, *, tolerance: float | None, minimum: float | None, how: str
) -> float:
    """``before``'s median time over ``after``'s, recorded on ``after`` as its ``speedup`` metric."""
    speedup = before.stats.median_ns / after.stats.median_ns if after.stats.median_ns > 0 else math.inf
    bench.metric(
        "speedup", speedup, unit="x", better="higher", tolerance=tolerance, minimum=minimum,
        measurement=after.name, description=how,
    )  # fmt: skip
    return speedup


def tensor_leaves(value: object) -> Iterator[torch.Tensor]:
    """The tensors inside a model output: a tensor, or tuples/lists/dicts of them."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, Mapping):
        for key in sorted(value, key=str):
            yield from tensor_leaves(value[key])
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensor_leaves(item)


def relative_error(actual: object, expected: object) -> float:
    """``||actual - expected|| / ||expected||`` over all tensor leaves in float64 (elementwise trips near 0)."""
    got = [t.detach().to(torch.float64).flatten() for t in tensor_leaves(actual)]
    ref = [t.detach().to(torch.float64).flatten() for t in tensor_leaves(expected)]
    if len(got) != len(ref) or not ref:
        raise ValueError(f"outputs differ in structure: {len(got)} tensors against {len(ref)} expected")
    a = torch.cat([g.cpu() for g in got])
    b = torch.cat([r.cpu() for r in ref])
    if a.shape != b.shape:
        raise ValueError(f"outputs differ in shape: {tuple(a.shape)} against {tuple(b.shape)}")
    if not bool(torch.isfinite(a).all()):
        return math.inf
    denom = float(torch.linalg.vector_norm(b))
    diff = float(torch.linalg.vector_norm(a - b))
    if denom == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / denom


def saved_activation_bytes(fn: Callable[[], Any], exclude: Any = ()) -> tuple[Any, int]:
    """Run ``fn`` and count the bytes autograd keeps alive for the backward pass.

    Storages are counted once (views share them), those in ``exclude`` (the
    parameters) left out. It measures the same way on CPU, where no allocator statistic helps.
    """
    excluded = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in excluded:
            seen[ptr] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn()
    return result, sum(seen.values())
