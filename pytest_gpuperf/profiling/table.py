"""What every profile table shares, whichever profiler took it: which profiled calls count, and the cut a stored
table is kept to.

A differential profile compares tables whole, so a capture keeps every row; a baseline entry keeps
the longest rows only (``STORED_ROWS``, a few KB in a baseline file), and its cut
(``OpProfile.omitted_below_ns``) says how long a row left out could have been.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

from pytest_gpuperf.model import OpProfile, OpStat

STORED_ROWS = 30  # rows a baseline entry's table keeps
# A profiled call more than this much over the median call's time was preempted (or carries the
# profiler's start-up): it is left out of every row of the table (typical_calls).
PREEMPTED_FENCE = 0.5


def typical_calls(totals: Sequence[float]) -> list[int]:
    """The calls whose total is within ``PREEMPTED_FENCE`` of the median's: a preempted call (or the profiler's
    start-up) is left out of every row at once, so the rows still add up to the calls kept."""
    if len(totals) < 3:
        return list(range(len(totals)))
    fence = statistics.median(totals) * (1 + PREEMPTED_FENCE)
    return [i for i, total in enumerate(totals) if total <= fence]


def top_rows(rows: Sequence[OpStat], on_cuda: bool, limit: int | None) -> tuple[tuple[OpStat, ...], float]:
    """The rows kept (all of them where ``limit`` is None), and the largest time (the ranking's) among those
    left out: the table's cut. On CUDA the ``limit // 3`` longest by host time are kept besides the ``limit``
    longest by device time: a launch-bound slowdown shows there."""

    def by_main(s: OpStat) -> float:
        return s.device_ns if on_cuda else s.host_ns

    ranked = sorted(rows, key=by_main, reverse=True)
    kept = ranked if limit is None else ranked[:limit]
    if on_cuda and limit is not None:
        chosen = {(s.kind, s.name) for s in kept}
        by_host = sorted(rows, key=lambda s: s.host_ns, reverse=True)
        kept += [s for s in by_host[: limit // 3] if (s.kind, s.name) not in chosen and s.host_ns > 0]
    kept_keys = {(s.kind, s.name) for s in kept}
    cut = max((by_main(s) for s in ranked if (s.kind, s.name) not in kept_keys), default=0.0)
    # An operator that took no time is the profiler's bookkeeping; a function that was called is a fact, even where
    # it left no time once the profiler's cost was taken off (python_profile.py).
    return tuple(s for s in kept if by_main(s) > 0 or s.host_ns > 0 or s.kind == "function"), cut


def stored_table(profile: OpProfile | None, limit: int = STORED_ROWS) -> OpProfile | None:
    """``profile`` cut to its ``limit`` longest rows, as a baseline entry keeps it, its cut recorded."""
    if profile is None:
        return None
    ops, cut = top_rows(profile.ops, profile.on_device, limit)
    return dataclasses.replace(profile, ops=ops, omitted_below_ns=max(profile.omitted_below_ns, cut))


SUMMARY_ROWS = 20  # rows of a capture's summary (``ProfileSummary.top_ops``)


def top_by_time(profile: OpProfile, limit: int = SUMMARY_ROWS) -> tuple[tuple[str, float, float], ...]:
    """(name, time per call ns, share of the call) of ``profile``'s longest rows, on its ranking's time."""
    total = (profile.device_ns if profile.on_device else profile.host_ns) or 0.0
    if total <= 0:
        return ()
    rows = sorted(profile.ops, key=lambda s: s.device_ns if profile.on_device else s.host_ns, reverse=True)
    return tuple((s.name, t, min(1.0, t / total)) for s in rows[:limit]
                 if (t := s.device_ns if profile.on_device else s.host_ns) > 0)  # fmt: skip
