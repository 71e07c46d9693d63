"""A differential profile's table by Python function, from the standard library's profiler (``cProfile``).

A call that runs no torch operator (plain Python, numpy) gets the same per-call table a
torch.profiler pass gives (``OpProfile``), its rows functions (``kind="function"``) instead of
operators, so the explanation (explain.py) ranks, bounds and adds it up alike. Each profiled
call is profiled on its own, so every row keeps one sample per call (the samples of its
interval): a function's *self* time in that call (its ``inlinetime``: the time in its own code,
its callees' excluded), so no microsecond counts twice and the rows add up to the call, which
is their sum. Its count is its calls per measured call. A preempted call is left out of every
row (``table.typical_calls``), as in a torch table.

A row is named by where its code lives, not by its file path or line: ``module:qualname`` for
Python code (the base of compare-ref runs in another worktree, and an edit above a function moves
its line), the profiler's own text for built-ins (``<built-in method builtins.sorted>``).
Functions that share a name (two lambdas of one function) are one row.

cProfile is the profiler on every supported Python; on 3.12 and later it is built on
``sys.monitoring`` itself, so a capture taken there needs no other path. Its own cost is measured
once a process and taken off (``profiler_cost``, as the standard library's ``profile.calibrate``
does for its pure-Python profiler): each call a function makes costs it a fixed time (the
profiler's work on that call's events lands in the caller's own time), and Python code runs
slower while profiled (3.11 traces every line while a profiler is set); C functions' own time is
kept. What is left of it makes the profile's change differ from the measured one, as torch.profiler's
per-operator cost does (explain.py's ``agreement`` rule allows for it).
"""

from __future__ import annotations

import cProfile
import functools
import math
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any

from pytest_gpuperf.errors import WriteError
from pytest_gpuperf.model import OpProfile, OpStat
from pytest_gpuperf.profiling.table import top_by_time, typical_calls
from pytest_gpuperf.profiling.torch_profile import ProfileCapture, export_trace

PSTATS_SUFFIX = ".pstats"  # a pass's merged statistics, for ``python -m pstats`` or snakeviz
_PROFILER_OWN = "_lsprof.Profiler"  # the profiler's own disable() call, recorded in every pass


def capture_calls(
    fn: Callable[..., object],
    args: Sequence[object],
    kwargs: Mapping[str, object],
    *,
    trace_path: Path | None,
    calls: int,
    budget_s: float | None = None,
    warm_call_s: float | None = None,
) -> ProfileCapture:
    """One pass of Python's profiler over ``calls`` calls of ``fn``, each profiled on its own.

    An unprofiled call (lazy initialization) comes first unless ``warm_call_s`` gives one call's length
    (``fn`` was just measured here); ``budget_s``: profile only as many calls as fit in it (one at least).
    ``trace_path``: the pass's merged statistics are written beside it, with the suffix ``PSTATS_SUFFIX``.
    """
    if calls < 1:
        raise ValueError(f"capture_calls: calls must be at least 1, got {calls}")
    if warm_call_s is None:
        started = time.perf_counter()
        fn(*args, **kwargs)
        warm_call_s = time.perf_counter() - started
    if budget_s is not None:
        calls = max(1, min(calls, math.floor(budget_s / max(warm_call_s, 1e-9))))
    passes = []
    for _ in range(calls):
        profiler = cProfile.Profile()
        profiler.runcall(fn, *args, **kwargs)
        passes.append(profiler)
    table = function_table([p.getstats() for p in passes], calls=calls)
    trace, trace_error = None, None
    if trace_path is not None:
        try:
            path = trace_path.with_suffix(PSTATS_SUFFIX)
            trace = str(export_trace(path, lambda to: pstats.Stats(*passes).dump_stats(to)))
        except WriteError as exc:  # a trace is a report: one that cannot be written is a note, not a failure
            trace_error = f"profile statistics not written: could not write {exc.path}: {exc.reason}"
    return ProfileCapture(trace_path=trace, trace_error=trace_error, activities=("python",),
                          top_ops=top_by_time(table), table=table)  # fmt: skip


@dataclass(frozen=True)
class ProfilerCost:
    """What Python's profiler adds to a profiled call, measured in this process (``profiler_cost``): per call, a cost
    in the caller's own time and one in the callee's, for a Python and for a C callee, and the slower lines."""

    python_call_ns: float  # charged to a function's own time for each call it makes to a Python function
    c_call_ns: float  # ... for each call it makes to a C function (a built-in, an extension's method)
    python_callee_ns: float  # charged to a Python function's own time for each call of it
    c_callee_ns: float  # ... to a C function's
    line_factor: float  # Python code's own time runs this many times slower while profiled (at least 1)

    def own_time_ns(self, entry: Any) -> float:
        """A ``getstats()`` entry's own time with the profiler's cost taken off, never below 0: a C function's its
        calls' cost; a Python function's its calls' and the calls it makes, then its slower lines."""
        raw = float(entry.inlinetime) * 1e9
        if isinstance(entry.code, str):
            return max(0.0, raw - self.c_callee_ns * entry.callcount)
        made = sum((self.c_call_ns if isinstance(sub.code, str) else self.python_call_ns) * sub.callcount
                   for sub in entry.calls or ())  # fmt: skip
        return max(0.0, raw - self.python_callee_ns * entry.callcount - made) / self.line_factor


CALIBRATION_LOOPS = 20_000  # iterations of each calibration loop: a few milliseconds
CALIBRATION_TRIES = 7  # each timed this many times, the least kept (a busy host only ever adds time)


def _lines(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def _nothing() -> None:
    return None


def _python_calls(n: int) -> None:
    for _ in range(n):
        _nothing()


def _c_calls(n: int, text: str = "a") -> None:
    for _ in range(n):
        text.isupper()


def _least(fn: Callable[[], object]) -> float:
    best = math.inf
    for _ in range(CALIBRATION_TRIES):
        started = time.perf_counter_ns()
        fn()
        best = min(best, time.perf_counter_ns() - started)
    return float(best)


def _profiled(fn: Callable[[int], object], n: int) -> dict[str, float]:
    """The least own time (ns) of each function of ``fn(n)`` over the tries, profiled."""
    best: dict[str, float] = {}
    for _ in range(CALIBRATION_TRIES):
        profiler = cProfile.Profile()
        profiler.runcall(fn, n)
        for entry in profiler.getstats():
            key = entry.code if isinstance(entry.code, str) else entry.code.co_name
            best[key] = min(best.get(key, math.inf), float(entry.inlinetime) * 1e9)
    return best


@functools.cache
def profiler_cost(n: int = CALIBRATION_LOOPS) -> ProfilerCost:
    """The profiler's cost here, from three loops timed plain and profiled: lines alone, calls of a Python function
    that does nothing, calls of a C method that does next to nothing. A callee's own time while profiled is taken
    as the profiler's (what it does is next to nothing); the caller's cost per call is what is left once its lines,
    slowed by the line factor, take the loop's plain time."""
    line_factor = max(1.0, _profiled(_lines, n)["_lines"] / _least(lambda: _lines(n)))
    python = _profiled(_python_calls, n)
    python_call = (python["_python_calls"] - line_factor * _least(lambda: _python_calls(n))) / n
    c = _profiled(_c_calls, n)
    c_call = (c["_c_calls"] - line_factor * _least(lambda: _c_calls(n))) / n
    c_callee = c["<method 'isupper' of 'str' objects>"] / n
    return ProfilerCost(max(0.0, python_call), max(0.0, c_call), python["_nothing"] / n, c_callee, line_factor)


def function_table(per_call: Sequence[Sequence[Any]], *, calls: int, cost: ProfilerCost | None = None) -> OpProfile:
    """The table of ``calls`` profiled calls, each one's ``cProfile.Profile.getstats()`` entries, the profiler's
    ``cost`` taken off each row (None: this process's, measured once)."""
    cost = cost or profiler_cost()
    modules = _modules_by_file()
    own: dict[str, list[float]] = {}  # row -> own time (ns) in each call
    count: dict[str, int] = {}
    for i, entries in enumerate(per_call):
        for entry in entries:
            name = function_name(entry.code, modules)
            if _PROFILER_OWN in name:
                continue
            own.setdefault(name, [0.0] * len(per_call))[i] += cost.own_time_ns(entry)
            count[name] = count.get(name, 0) + int(entry.callcount)
    totals = [sum(times[i] for times in own.values()) for i in range(len(per_call))]
    kept = typical_calls(totals)
    ops = [
        OpStat(name, "function", count[name] / calls, statistics.fmean(ns), host_samples_ns=ns)
        for name, times in own.items()
        if (ns := tuple(times[i] for i in kept))  # a function called but left no time once corrected is a row
    ]
    samples = tuple(totals[i] for i in kept)
    return OpProfile(device_type="cpu", profiled_calls=calls, host_ns=statistics.fmean(samples) if samples else 0.0,
                     ops=tuple(sorted(ops, key=lambda s: s.host_ns, reverse=True)), torch=None,
                     host_samples_ns=samples)  # fmt: skip


def function_name(code: CodeType | str, modules: Mapping[str, str]) -> str:
    """``module:qualname`` for Python code (the file's name where no loaded module has it); a built-in's text."""
    if isinstance(code, str):
        return code
    where = modules.get(code.co_filename) or Path(code.co_filename).name
    return f"{where}:{getattr(code, 'co_qualname', code.co_name)}"


def _modules_by_file() -> dict[str, str]:
    """Each loaded module's file -> its name, to name a function the same wherever its checkout lies."""
    found = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            found[file] = name
    return found
