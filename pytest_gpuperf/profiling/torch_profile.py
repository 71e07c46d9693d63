"""A short torch.profiler capture of a measured function (``--gpuperf-profile``).

It runs after the timed rounds, never during them: the profiler's own
overhead would otherwise be part of the samples. It writes a Chrome trace
(open it in https://ui.perfetto.dev, chrome://tracing or TensorBoard) and
summarizes the operators that took the most time.

Times are *self* times (an operator's own time, without its children), so
the shares of different operators never count the same microsecond twice.
On CUDA the ranking is by self device time and shares are fractions of the
total kernel time; on the CPU it is by self CPU time.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.files import export_atomic
from pytest_gpuperf.gpu.device import cuda_synchronize
from pytest_gpuperf.model import ProfileSummary
from pytest_gpuperf.report.units import format_time

if TYPE_CHECKING:
    import torch

TOP_OPS = 20  # kept in the summary; the terminal shows fewer
RANGE_PREFIX = "gpuperf:"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_label(label: str, *, max_len: int = 120) -> str:
    """A file name for ``label``: readable, and unique even when two labels sanitize alike."""
    digest = hashlib.sha1(label.encode("utf-8")).hexdigest()[:8]
    readable = _UNSAFE.sub("_", label).strip("._-")[:max_len] or "profile"
    return f"{readable}-{digest}"


def profile_calls(
    fn: Callable[..., object],
    args: Sequence[object],
    kwargs: Mapping[str, object],
    *,
    out_dir: Path,
    label: str,
    device: torch.device,
    calls: int = 5,
) -> ProfileSummary:
    """Profile ``calls`` calls of ``fn`` (after one unprofiled warm-up call) and export a trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if calls < 1:
        raise ValueError(f"profile_calls: calls must be at least 1, got {calls}")
    on_cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU]
    if on_cuda:
        activities.append(ProfilerActivity.CUDA)
    call_kwargs = dict(kwargs)

    fn(*args, **call_kwargs)  # lazy initialization stays out of the profile
    cuda_synchronize(device)
    with profile(activities=activities, record_shapes=True, profile_memory=True) as prof:
        for i in range(calls):
            with record_function(f"{RANGE_PREFIX}{label}#{i}"):
                fn(*args, **call_kwargs)
        cuda_synchronize(device)

    trace = export_atomic(out_dir / f"{safe_label(label)}.json", prof.export_chrome_trace)
    names = ("cpu", "cuda") if on_cuda else ("cpu",)
    return ProfileSummary(
        trace_path=str(trace),
        top_ops=top_operators(prof.key_averages(), on_cuda=on_cuda, is_cuda_event=_is_cuda(torch)),
        activities=names,
    )


def _is_cuda(torch_module: Any) -> Callable[[Any], bool]:
    cuda_type = torch_module.autograd.DeviceType.CUDA
    return lambda event: getattr(event, "device_type", None) == cuda_type


def _self_device_us(event: Any) -> float:
    # ``self_device_time_total`` since torch 2.4; ``self_cuda_time_total`` before.
    value = getattr(event, "self_device_time_total", None)
    if value is None:
        value = getattr(event, "self_cuda_time_total", 0.0)
    return float(value or 0.0)


def top_operators(
    averages: Sequence[Any],
    *,
    on_cuda: bool,
    is_cuda_event: Callable[[Any], bool],
    limit: int = TOP_OPS,
) -> tuple[tuple[str, float, float], ...]:
    """(name, self time ns, share of the total) for the operators that took longest.

    On CUDA, kernels appear twice in ``key_averages()``: as kernel events and
    inside the self device time of the operator that launched them. Ranking
    uses the operators; the total is the kernels', so work launched outside
    any operator lowers the shares instead of inflating them.
    """
    rows: list[tuple[str, float]] = []
    total_us = 0.0
    for event in averages:
        key = str(event.key)
        if on_cuda:
            if is_cuda_event(event):
                total_us += _self_device_us(event)
                continue
            time_us = _self_device_us(event)
        else:
            time_us = float(event.self_cpu_time_total or 0.0)
            total_us += time_us
        if time_us > 0 and not key.startswith(RANGE_PREFIX) and not key.startswith("[memory]"):
            rows.append((key, time_us))
    if total_us <= 0:
        return ()
    rows.sort(key=lambda r: r[1], reverse=True)
    return tuple((name, us * 1e3, min(1.0, us / total_us)) for name, us in rows[:limit])


def format_top_ops(summary: ProfileSummary, n: int = 10) -> list[str]:
    """Terminal lines: where the trace is, then the top ``n`` operators with share and time."""
    kind = "device" if "cuda" in summary.activities else "CPU"
    lines = [f"trace: {summary.trace_path} (open in https://ui.perfetto.dev)"]
    if not summary.top_ops:
        lines.append(f"  no operator recorded {kind} time")
        return lines
    lines.append(f"  top operators by self {kind} time:")
    for name, time_ns, share in summary.top_ops[:n]:
        lines.append(f"  {share:6.1%}  {format_time(time_ns):>10}  {name}")
    return lines
