"""What both engines do to a measurement's result after the verdict: notes and the differential profile."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from pytest_gpuperf.measure.profiled import ProfiledSide
from pytest_gpuperf.model import MeasuredChange, Measurement, MeasurementResult, Note, NoteKind, Verdict
from pytest_gpuperf.profiling.plan import ProfilePlan
from pytest_gpuperf.verdict.confirmation import time_of


def noted(measurement: Measurement, text: str, topic: str = "", kind: NoteKind = NoteKind.NOTICE) -> Measurement:
    return dataclasses.replace(measurement, notes=(*measurement.notes, Note(text, kind, topic)))


def regressed(result: MeasurementResult) -> bool:
    """The time comparison's final verdict (after any confirmation) is a regression: what a profile diff explains."""
    return time_of(result).verdict is Verdict.REGRESSION


def with_note(result: MeasurementResult, note: str) -> MeasurementResult:
    return dataclasses.replace(result, measurement=noted(result.measurement, note))


def measured_change(result: MeasurementResult) -> MeasuredChange | None:
    """The time comparison's change per call, head minus base, with its interval (the CI of the ratio)."""
    c = time_of(result)
    if c.baseline is None or c.ci_low is None or c.ci_high is None:
        return None
    return MeasuredChange(c.current - c.baseline, c.baseline * (c.ci_low - 1), c.baseline * (c.ci_high - 1))


def with_profile_diff(
    result: MeasurementResult,
    head_side: Callable[[int], ProfiledSide],
    base_side: Callable[[int], ProfiledSide],
    *,
    base_label: str,
    plan: ProfilePlan | None = None,
) -> MeasurementResult:
    """``result`` with its differential profile; without the head's profile only a note says why.

    Both sides are profiled over the same number of calls, more each pass while the plan allows
    (profiling/plan.py): until the rows that explain the measured change are resolved, or the budget is spent.
    """
    from pytest_gpuperf.profiling.diff import diff_profiles

    plan = plan or ProfilePlan()
    measured = measured_change(result)
    calls: int | None = plan.first
    spent = 0.0
    diff = None
    while calls is not None:
        start = time.perf_counter()
        head = head_side(calls)
        base = base_side(calls) if head.profile is not None else ProfiledSide(None)
        took = time.perf_counter() - start
        spent += took
        if head.profile is None:
            return with_note(result, f"no profile diff: {head.problem}")
        note = f"{base.problem}: the head's top rows alone" if base.profile is None and base.problem else ""
        diff = diff_profiles(head.profile, base.profile, base_label=base_label, head_trace=head.trace,
                             base_trace=base.trace, note=note, measured=measured)  # fmt: skip
        calls = plan.next_calls(calls, spent, took, diff.finding)
    return dataclasses.replace(result, profile_diff=diff)
