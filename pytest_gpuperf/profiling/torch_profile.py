"""A short torch.profiler capture of a measured function (``--gpuperf-profile``), after the timed rounds.

It writes a Chrome trace and ranks operators by *self* time (device time on CUDA, CPU time on
the CPU), so no microsecond counts twice. The same pass gives the compact per-call table
(``OpProfile``) a baseline entry keeps and a differential profile compares.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pytest_gpuperf.errors import WriteError
from pytest_gpuperf.files import export_atomic, write_gitignore
from pytest_gpuperf.gpu.device import cuda_synchronize
from pytest_gpuperf.model import OpProfile, OpStat, ProfileSummary
from pytest_gpuperf.profiling.quiet import quiet_profiler, torch_warnings_stay_warnings
from pytest_gpuperf.profiling.table import top_rows, typical_calls

if TYPE_CHECKING:
    import torch

TOP_OPS = 20  # kept in the summary; the terminal shows fewer
PROFILED_CALLS = 5  # a --gpuperf-profile capture; a differential profile's calls grow by plan.ProfilePlan
RANGE_PREFIX = "gpuperf:"
# The CPU time of a measured call that no operator claims: Python, the user's own code.
OUTSIDE_OPS = "[host time outside operators]"
_SKIPPED = ("[memory]", "ProfilerStep")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# A trace folder pytest-gpuperf creates (by default ``.gpuperf/profiles`` in the user's repository) keeps
# its traces out of git; a folder that already existed is the user's and gets nothing.
TRACES_GITIGNORE = "# pytest-gpuperf: profiler traces, written anew by each run\n*\n"


def safe_label(label: str, *, max_len: int = 120) -> str:
    """A file name for ``label``: readable, and unique even when two labels sanitize alike."""
    digest = hashlib.sha1(label.encode("utf-8")).hexdigest()[:8]
    readable = _UNSAFE.sub("_", label).strip("._-")[:max_len] or "profile"
    return f"{readable}-{digest}"


def trace_file(folder: Path, key: str, side: str) -> Path:
    """``<folder>/<safe key>.<side>.json``: one trace per side of a measurement's differential profile."""
    return folder / f"{safe_label(key)}.{side}.json"


def export_trace(path: Path, export: Callable[[str], object]) -> Path:
    """``export_atomic`` of a trace; a folder this creates gets a ``.gitignore`` of its own (TRACES_GITIGNORE)."""
    created = not path.parent.exists()
    export_atomic(path, export)
    if created:
        write_gitignore(path.parent, TRACES_GITIGNORE)
    return path


@dataclass(frozen=True)
class ProfileCapture:
    """One profiler pass over a few calls: its Chrome trace (if exported), top operators and per-call table."""

    trace_path: str | None
    top_ops: tuple[tuple[str, float, float], ...]
    activities: tuple[str, ...]
    table: OpProfile
    trace_error: str | None = None  # why the trace asked for was not written (a read-only folder, a full disk)

    def summary(self) -> ProfileSummary:
        return ProfileSummary(trace_path=self.trace_path or "", top_ops=self.top_ops, activities=self.activities)


def capture_calls(
    fn: Callable[..., object],
    args: Sequence[object],
    kwargs: Mapping[str, object],
    *,
    trace_path: Path | None,
    label: str,
    device: torch.device,
    calls: int = PROFILED_CALLS,
    detailed: bool = True,
    budget_s: float | None = None,
    warm_call_s: float | None = None,
) -> ProfileCapture:
    """One profiler pass over ``calls`` calls of ``fn``, each in a ``gpuperf:<label>#i`` range (i >= 1).

    An unprofiled call (lazy initialization) and a profiled warm-up call ``#0`` (the profiler's first-call
    costs; left out of the tables, not of the trace) come first. ``trace_path`` None: no Chrome trace.
    ``detailed`` records shapes and memory too (``--gpuperf-profile``); a differential profile needs neither.
    ``budget_s``: profile only as many of the ``calls`` as one call's length fits in it (one at least).
    ``warm_call_s``: one call's length where ``fn`` was just measured in this process, so its lazy
    initialization is done: the unprofiled call, which would repeat that work, is not made.
    """
    # torch.autograd.profiler.profile: the profiler torch.profiler.profile drives, without the import of
    # torch._inductor at its first start in a process (about a second of CPU, to read one setting).
    import torch
    from torch.autograd.profiler import profile, record_function

    if calls < 1:
        raise ValueError(f"capture_calls: calls must be at least 1, got {calls}")
    on_cuda = device.type == "cuda"

    with torch_warnings_stay_warnings():  # a compiled fn may be traced again here (quiet.py)
        if warm_call_s is None:
            started = time.perf_counter()
            fn(*args, **kwargs)  # lazy initialization stays out of the profile
            cuda_synchronize(device)
            warm_call_s = time.perf_counter() - started
        if budget_s is not None:
            calls = max(1, min(calls, math.floor(budget_s / max(warm_call_s, 1e-9))))
        with quiet_profiler(), profile(use_device="cuda" if on_cuda else None, use_kineto=True,
                                       record_shapes=detailed, profile_memory=detailed) as prof:  # fmt: skip
            for i in range(calls + 1):
                with record_function(f"{RANGE_PREFIX}{label}#{i}"):
                    fn(*args, **kwargs)
                if i in (0, calls):
                    cuda_synchronize(device)  # the warm-up's kernels end before call #1, the last's inside the pass
    events = after_warm_up(prof.function_events)

    trace, trace_error = None, None
    if trace_path is not None:
        try:
            trace = str(export_trace(trace_path, prof.export_chrome_trace))
        except WriteError as exc:  # a trace is a report: one that cannot be written is a note, not a failure
            trace_error = f"profile trace not written: could not write {exc.path}: {exc.reason}"
    is_cuda_event = _is_cuda(torch)
    return ProfileCapture(
        trace_path=trace, trace_error=trace_error, activities=("cpu", "cuda") if on_cuda else ("cpu",),
        top_ops=top_operators(events, on_cuda=on_cuda, is_cuda_event=is_cuda_event),
        table=op_table(events, calls=calls, on_cuda=on_cuda, is_cuda_event=is_cuda_event,
                       torch_version=str(torch.__version__)),
    )  # fmt: skip


def after_warm_up(events: Sequence[Any]) -> list[Any]:
    """The events from the start of the second ``gpuperf:`` range on: the warm-up call's are dropped."""
    starts = sorted(e.time_range.start for e in events if str(e.key).startswith(RANGE_PREFIX))
    return [e for e in events if len(starts) < 2 or e.time_range.start >= starts[1]]


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
    events: Sequence[Any],
    *,
    on_cuda: bool,
    is_cuda_event: Callable[[Any], bool],
    limit: int = TOP_OPS,
) -> tuple[tuple[str, float, float], ...]:
    """(name, self time ns, share of the total) for the longest operators of ``events`` (or their averages).

    On CUDA, kernels appear twice: as kernel events and in their operator's self device time.
    Ranking uses the operators and the total the kernels, so work launched outside any operator
    lowers the shares instead of inflating them.
    """
    by_name: dict[str, float] = {}
    total_us = 0.0
    for event in events:
        key = str(event.key)
        if on_cuda:
            if is_cuda_event(event):
                total_us += _self_device_us(event)
                continue
            time_us = _self_device_us(event)
        else:
            time_us = float(event.self_cpu_time_total or 0.0)
            total_us += time_us
        if time_us > 0 and not key.startswith((RANGE_PREFIX, *_SKIPPED)):
            by_name[key] = by_name.get(key, 0.0) + time_us
    if total_us <= 0:
        return ()
    rows = sorted(by_name.items(), key=lambda r: r[1], reverse=True)
    return tuple((name, us * 1e3, min(1.0, us / total_us)) for name, us in rows[:limit])


_Row = tuple[Literal["operator", "kernel"], str]


def op_table(
    events: Sequence[Any],
    *,
    calls: int,
    on_cuda: bool,
    is_cuda_event: Callable[[Any], bool],
    limit: int | None = None,
    torch_version: str | None = None,
) -> OpProfile:
    """The per-call table of a profiler pass (``prof.events()``) over ``calls`` calls, each in a ``gpuperf:`` range.

    Every time is kept per profiled call (the samples of a row's interval, profiling/explain.py) and
    reported as their mean, so rows add up to the call: a call's host time is its range's CPU time, an
    operator's its self CPU time inside the range, and the rest of the range is a row of its own
    (``OUTSIDE_OPS``). A kernel's device time counts in the call its launch started in (kernels are
    asynchronous: the last one may end after its range). Counts are per-call averages. The table keeps
    every row, or with a ``limit`` the rows ``table.top_rows`` keeps.
    """
    ranges = sorted((e for e in events if str(e.key).startswith(RANGE_PREFIX)), key=lambda e: e.time_range.start)
    starts = [r.time_range.start for r in ranges]
    host: dict[_Row, list[float]] = {}  # (kind, name) -> self CPU time (us) in each call
    device: dict[_Row, list[float]] = {}  # (kind, name) -> device time (us) in each call
    count: dict[_Row, int] = {}
    for event in events:
        key = str(event.key)
        if key.startswith((RANGE_PREFIX, *_SKIPPED)):
            continue
        kernel = on_cuda and is_cuda_event(event)
        row: _Row = ("kernel", kernel_identity(event)) if kernel else ("operator", key)
        count[row] = count.get(row, 0) + 1
        host.setdefault(row, [0.0] * len(ranges))
        device.setdefault(row, [0.0] * len(ranges))
        call = bisect.bisect_right(starts, event.time_range.start) - 1
        if call < 0:
            continue
        if on_cuda:
            device[row][call] += _self_device_us(event)
        if not kernel and event.time_range.start <= ranges[call].time_range.end:
            host[row][call] += float(event.self_cpu_time_total or 0.0)
    totals = [float(r.cpu_time_total or 0.0) for r in ranges]
    kept = typical_calls(totals)
    rows = [_stat(name, kind, n / calls, _pick(host[(kind, name)], kept), _pick(device[(kind, name)], kept) if on_cuda
                  else []) for (kind, name), n in count.items()]  # fmt: skip
    outside = _pick([float(r.self_cpu_time_total or 0.0) for r in ranges], kept)
    if sum(outside) > 0:
        rows.append(_stat(OUTSIDE_OPS, "operator", 1.0, outside, []))
    kernels = [sum(t) for t in zip(*(v for (kind, _), v in device.items() if kind == "kernel"), strict=True)]
    kernels = _pick(kernels, kept) if kernels else [0.0] * len(kept)
    ops, omitted_below_ns = top_rows(rows, on_cuda, limit)
    host_samples = _ns(_pick(totals, kept))
    return OpProfile(
        device_type="cuda" if on_cuda else "cpu",
        profiled_calls=calls,
        host_ns=_mean(host_samples),
        device_ns=_mean(_ns(kernels)) if on_cuda else None,
        ops=ops,
        torch=torch_version,
        omitted_below_ns=omitted_below_ns,
        host_samples_ns=host_samples,
        device_samples_ns=_ns(kernels) if on_cuda else (),
    )


LAUNCH = " [grid "  # where a kernel's identity appends its launch configuration


def kernel_identity(event: Any) -> str:
    """A kernel's name with its grid and block where the profiler records them (``FunctionEvent.event_metadata``):
    ``name [grid 128x1x1, block 256x1x1]``, so a kernel launched with a new configuration is a new row."""
    meta = getattr(event, "event_metadata", None)
    grid, block = getattr(meta, "grid", None), getattr(meta, "block", None)
    if not grid or not block:
        return str(event.key)
    return f"{event.key}{LAUNCH}{'x'.join(map(str, grid))}, block {'x'.join(map(str, block))}]"


def launch_base(name: str) -> str:
    """A kernel row's name without its launch configuration."""
    return name.split(LAUNCH, 1)[0]


def _pick(samples: Sequence[float], kept: Sequence[int]) -> list[float]:
    return [samples[i] for i in kept]


def _ns(per_call_us: Sequence[float]) -> tuple[float, ...]:
    return tuple(us * 1e3 for us in per_call_us)


def _mean(samples: Sequence[float]) -> float:
    return statistics.fmean(samples) if samples else 0.0


def _stat(name: str, kind: Literal["operator", "kernel"], calls: float, host_us: Sequence[float],
          device_us: Sequence[float]) -> OpStat:  # fmt: skip
    host, device = _ns(host_us), _ns(device_us)
    return OpStat(name, kind, calls, _mean(host), _mean(device),
                  host_samples_ns=host, device_samples_ns=device)  # fmt: skip
