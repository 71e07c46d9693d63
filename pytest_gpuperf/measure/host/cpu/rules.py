"""Verdict rules that exist because a shared CPU runs the measured code.

Other processes slow the median and the tail while the fastest calls keep their
speed, and slow the whole machine for seconds at a time or between sessions. These
rules tell such moves from a change in the code; the GPU path never loads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gpuperf.measure.host.cpu.contention import Contention
from pytest_gpuperf.measure.host.cpu.speed_probe import beyond_spread, explainable_change, is_slow, slowdown
from pytest_gpuperf.model import Comparison, Kind, Verdict
from pytest_gpuperf.verdict.case import Case
from pytest_gpuperf.verdict.pipeline import Step

# the calibration ratio outside this range means the machines differ, not the load
_CALIBRATION_SANE = (0.25, 4.0)
_DURATION_UNITS = frozenset({"s", "ms", "us", "ns"})


@dataclass(frozen=True)
class BusyRunner:
    """Where the run-queue wait could not be taken out, a time change measured busy is no verdict.

    Every measurement this version takes carries its scheduler accounting, and the contention rule
    judges those on corrected times. What is left: a measurement with no accounting (a recorded one,
    an older results file) whose contention counters read busy is UNSTABLE, and still suspected; an
    entry written busy that keeps no correction (written before corrections were recorded, or whose
    correction was too uncertain to keep) inflates the reference, so only a regression beyond it
    stands: anything else against it is NOT_GATED. Off with ``busy_policy=judge``.
    """

    name: str = "busy-runner"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        entry = case.entry
        if entry is not None and entry.written_busy and entry.correction is None:
            if draft.verdict is Verdict.REGRESSION:
                said = f"the baseline was written while the runner was busy ({entry.written_busy})"
                return Step(f"{said}: a regression against a slow baseline is larger still", quiet=True)
            return Step(
                f"not gated: the baseline was written while the runner was busy ({entry.written_busy}) and keeps no "
                "correction for it, so it can hide a regression (--gpuperf-strict makes this fail); write it again "
                "with --gpuperf-update-baseline",
                Verdict.NOT_GATED,
                final=True,
            )
        if draft.verdict not in (Verdict.REGRESSION, Verdict.IMPROVEMENT) or case.measurement.scheduling is not None:
            return None
        contention = Contention.from_data(case.measurement.health)
        if contention is None or not contention.busy:
            return None
        change = f"{draft.change:+.1%} " if draft.change is not None else ""
        return Step(f"unstable: the runner was busy ({contention.describe()}) and this measurement has no scheduler "
                    f"accounting to take the contention out; the {change}change is not judged",
                    Verdict.UNSTABLE)  # fmt: skip


@dataclass(frozen=True)
class Calibration:
    """With ``--gpuperf-calibrate=on``: a change the calibration workload's own change explains is cleared.

    Never the reverse: the workload carries its own per-process offset.
    """

    name: str = "calibration"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        entry = case.entry
        cur = case.measurement.calibration_ns
        base = entry.calibration_ns if entry is not None else None
        if not case.settings.calibrate or not cur or not base or draft.change is None:
            return None
        if draft.verdict not in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
            return None
        scale = base / cur
        if not _CALIBRATION_SANE[0] <= scale <= _CALIBRATION_SANE[1]:
            return Step(f"calibration ratio {scale:.2f} out of range, not used", quiet=True)
        normalized = (1.0 + draft.change) * scale - 1.0
        threshold = draft.threshold or case.settings.threshold
        if abs(normalized) > threshold and (normalized > 0) == (draft.change > 0):
            return Step(f"calibration-normalized change {normalized:+.1%} agrees", quiet=True)
        return Step(
            f"{normalized:+.1%} after calibration (calibration time x{1 / scale:.3f} vs baseline): "
            "the machine's own change explains it",
            Verdict.UNCHANGED,
        )


def _beyond(ratio: float, spread: float | None) -> str:
    """The evidence a slow-machine note adds: how far beyond the probe's own spread it read."""
    if spread is None:
        return ""
    return f"; x{beyond_spread(ratio, spread) or ratio:.2f} beyond its own spread of x{spread:.2f} on this host"


def _slow_regression(ratio: float, spread: float | None, change: float | None, threshold: float, what: str) -> Step:
    """A regression while the machine ran ``ratio`` times slower (beyond the probe's spread): unstable, unless larger
    than the machine explains."""
    effective = beyond_spread(ratio, spread) or ratio
    limit = explainable_change(effective, threshold)
    evidence = _beyond(ratio, spread)
    slower = f"the machine ran x{ratio:.2f} slower than when the baseline was written (speed probe{evidence})"
    if change is None or change <= limit:
        return Step(f"not judged: {slower}, which alone can explain {what} up to {limit:+.1%}", Verdict.UNSTABLE)
    return Step(f"{slower}, which explains at most {limit:+.1%}: {change:+.1%} is more than the machine")


def _within_spread(ratio: float, spread: float | None, direction: str) -> Step | None:
    """A note where the probe read a slow machine by the fixed ratio alone, but not beyond its own spread."""
    if spread is None or not is_slow(ratio) or is_slow(ratio, spread):
        return None
    return Step(
        f"speed probe x{ratio:.2f} {direction}, within its own spread of x{spread:.2f} on this host "
        "while the baseline was written: not a slow machine"
    )


@dataclass(frozen=True)
class SlowMachine:
    """The speed probe: a regression while the machine reads x1.25 slower than at the baseline, beyond the probe's
    own spread, is unstable, unless larger than such a machine explains; so is a pass against a baseline written
    while it read that much slower (it hides regressions)."""

    name: str = "slow-machine"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        entry = case.entry
        ratio = slowdown(case.measurement.speed_probe_ns, entry.speed_probe_ns if entry is not None else None)
        if ratio is None or entry is None:
            return None
        spread = entry.speed_probe_spread
        if draft.verdict is Verdict.REGRESSION:
            if not is_slow(ratio, spread):
                return _within_spread(ratio, spread, "slower now")
            threshold = draft.threshold or case.settings.threshold
            return _slow_regression(ratio, spread, draft.change, threshold, "a regression")
        if draft.verdict in (Verdict.UNCHANGED, Verdict.IMPROVEMENT):
            if not is_slow(1.0 / ratio, spread):
                return _within_spread(1.0 / ratio, spread, "slower at the baseline")
            return Step(
                f"not judged: the baseline was written while the machine ran x{1.0 / ratio:.2f} slower than now "
                f"(speed probes{_beyond(1.0 / ratio, spread)}), so a regression could hide behind it; write it again",
                Verdict.UNSTABLE,
            )
        return None


@dataclass(frozen=True)
class SlowDurations:
    """A metric that is a duration (a compile's first call, in s/ms/us/ns) follows the machine's speed too."""

    name: str = "slow-machine"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        metric, entry = case.metric, case.entry
        if case.kind is not Kind.METRIC or metric is None or metric.unit not in _DURATION_UNITS:
            return None
        if draft.verdict is not Verdict.REGRESSION or entry is None:
            return None
        ratio = slowdown(case.measurement.speed_probe_ns, entry.speed_probe_ns)
        if not is_slow(ratio, entry.speed_probe_spread):
            return None
        assert ratio is not None
        threshold = draft.threshold or metric.tolerance or 0.0
        return _slow_regression(ratio, entry.speed_probe_spread, draft.change, threshold, "a longer duration")
