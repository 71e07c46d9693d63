"""The rules every host shares, each a small object with a name, a note and its own test.

Host-specific rules live with their host guard in ``pytest_gpuperf.measure.host``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pytest_gpuperf import stats
from pytest_gpuperf.model import Comparison, CorrectedChange, Kind, Verdict, device_class, not_finite
from pytest_gpuperf.model.scheduling import MOSTLY_WAITED
from pytest_gpuperf.units import format_bytes
from pytest_gpuperf.verdict.case import Case
from pytest_gpuperf.verdict.pipeline import Step

UPDATE_HINT = "--gpuperf-update-baseline"


@dataclass(frozen=True)
class Reference:
    """No reference: NEW. A reference of another device class: NOT_COMPARABLE. Both end the pipeline."""

    name: str = "reference"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        here = case.environment.device_class
        entry = case.entry
        there = entry.environment.device_class if entry is not None and entry.environment else None
        if entry is not None and there not in (None, here):
            return Step(_other_class((there or "",), here), Verdict.NOT_COMPARABLE, final=True)
        if entry is None and case.other_classes:
            return Step(_other_class(case.other_classes, here), Verdict.NOT_COMPARABLE, final=True)
        missing = (
            entry is None
            or (case.kind is Kind.MEMORY and entry.peak_allocated_bytes is None)
            or (case.kind is Kind.METRIC and case.reference_metric is None)
        )
        if missing and case.unmeasured:  # the reference has the test: its absence of a number gates nothing
            return Step(f"not gated: {case.unmeasured}", Verdict.NOT_GATED, final=True)
        if missing:
            what = "no baseline" if case.base_ref is None else f"not measured at {case.base_ref}"
            return Step(what, Verdict.NEW, final=True)
        return None


def _other_class(there: tuple[str, ...], here: str) -> str:
    """Why each class's baseline is no reference here (device_class.why_not_comparable), and what to do."""
    reasons = "; ".join(device_class.why_not_comparable(cls, here) for cls in there)
    return f"not comparable: {reasons} (record one here with {UPDATE_HINT}; --gpuperf-strict makes this fail)"


@dataclass(frozen=True)
class MinimumSamples:
    """A time verdict needs ``settings.min_samples`` independent readings on each side, whatever the reference."""

    name: str = "minimum-samples"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        ev = case.evidence
        needed = case.settings.min_samples
        have = ev.readings if ev is not None else case.measurement.stats.count
        reference = ev.reference_readings if ev is not None else needed
        if min(have, reference) >= needed:
            return None
        side = "this run" if have <= reference else f"the {case.reference_name}"
        return Step(
            f"not gated: {side} has {min(have, reference)} sample(s), fewer than the {needed} a verdict needs "
            "(each call is slow: raise --gpuperf-time-limit, or measure a smaller step)",
            Verdict.NOT_GATED,
            final=True,
        )


# How far recorded noise may raise the threshold, as a multiple of the configured one (NoiseFloor).
NOISE_FLOOR_CAP = 2.5


@dataclass(frozen=True)
class RecordedNoise:
    """The between-run noise of both sides and the threshold it asks for (stats.noise_floor)."""

    baseline: float | None
    current: float | None
    floor: float

    @classmethod
    def of(cls, case: Case) -> RecordedNoise | None:
        """The noise recorded with ``case``'s baseline entry and measured now; None without an entry."""
        if case.entry is None:
            return None
        base_noise = case.entry.noise
        if base_noise is None:
            base_noise = stats.between_run_noise(case.entry.round_medians_ns)
        current_noise = stats.between_run_noise(case.measurement.judged_round_medians_ns)
        floor = stats.noise_floor(base_noise, current_noise, case.settings.noise_multiplier)
        return cls(base_noise, current_noise, floor)

    def describe(self) -> str:
        return f"the recorded noise (baseline {_pct(self.baseline)}, this run {_pct(self.current)})"


def noise_cap(settings_threshold: float) -> float:
    """The highest threshold recorded noise may raise ``settings_threshold`` to."""
    return NOISE_FLOOR_CAP * settings_threshold


@dataclass(frozen=True)
class NoiseFloor:
    """The threshold is never below what the recorded between-run noise allows (stats.noise_floor), up to a cap.

    The noise is an estimate from a few readings, large if the machine was busy then; a floor that follows
    it blinds the gate (a noise of 0.95 would ask for +285%). So it stops at ``NOISE_FLOOR_CAP`` times the
    threshold; a change the capped threshold calls but the noise would not is the noisy-baseline rule's."""

    name: str = "noise-floor"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        noise = RecordedNoise.of(case)
        if noise is None:
            return None
        configured = case.settings.threshold
        if noise.floor <= configured:
            return Step(f"threshold {configured:.1%}", threshold=configured, quiet=True)
        cap = noise_cap(configured)
        if noise.floor > cap:
            return Step(
                f"threshold raised from {configured:.1%} to {cap:.1%}, capped at {NOISE_FLOOR_CAP:g}x: "
                f"{noise.describe()} would raise it to {noise.floor:.1%}, more than a few readings can support; "
                "write the baseline again on a quieter machine",
                threshold=cap,
            )
        raised = f"threshold raised from {configured:.1%} to {noise.floor:.1%} by run-to-run noise"
        return Step(raised, threshold=noise.floor)


@dataclass(frozen=True)
class NoisyBaseline:
    """A change past the capped threshold but within the recorded noise is no verdict: NOT_GATED, final.

    Where the noise asks for more than ``NOISE_FLOOR_CAP`` times the threshold (a baseline written while the
    runner was busy, or a run measured under load), the capped threshold lets that noise through as a
    regression or an improvement. Such an entry cannot gate at this threshold: the note says why and what to
    do, and ``--gpuperf-strict`` decides whether that fails. A change beyond even the noise still stands."""

    name: str = "noisy-baseline"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        change = judged_change(case, draft)
        if draft.verdict not in (Verdict.REGRESSION, Verdict.IMPROVEMENT) or change is None:
            return None
        noise = RecordedNoise.of(case)
        configured = case.settings.threshold
        if noise is None or noise.floor <= noise_cap(configured) or abs(change) > noise.floor:
            return None
        note = (
            f"not gated: {change:+.1%} is within the recorded noise, which asks for a threshold of "
            f"{noise.floor:.1%}, beyond the {noise_cap(configured):.1%} cap: this baseline entry cannot gate at "
            f"{configured:.1%}; {_noisy_side(case, noise)} (--gpuperf-strict makes this fail)"
        )
        return Step(note, Verdict.NOT_GATED, final=True)


def judged_change(case: Case, draft: Comparison) -> float | None:
    """The change the verdict reads: the evidence's (corrected for run-queue wait where a side waited), else the
    comparison's."""
    return case.evidence.change if case.evidence is not None else draft.change


def _noisy_side(case: Case, noise: RecordedNoise) -> str:
    """What to do: write the baseline again, or measure again, in a quieter hour (whichever side was noisier)."""
    if (noise.current or 0.0) > (noise.baseline or 0.0):
        return "this run measured under load: run it again in a quieter hour, or gate with --gpuperf-compare-ref"
    busy = case.entry.written_busy if case.entry is not None else None
    written = f"it was written while the runner was busy ({busy})" if busy else "it was written on a noisy machine"
    return f"{written}: write it again in a quieter hour with {UPDATE_HINT}"


def _pct(noise: float | None) -> str:
    return "unknown" if noise is None else f"{noise:.1%}"


@dataclass(frozen=True)
class Significance:
    """Large enough (|change| above the threshold) and significant (the CI of the ratio excludes 1)."""

    name: str = "significance"
    suspects: bool = True  # a change it calls awaits confirmation (off where it judges the confirmation itself)

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        ev = case.evidence
        if ev is None:
            return None
        threshold = draft.threshold if draft.threshold is not None else case.settings.threshold
        verdict = time_verdict(ev.change, ev.low, ev.high, threshold)
        side = "excludes 1" if ev.low > 1.0 or ev.high < 1.0 else "includes 1"
        size = "above" if abs(ev.change) > threshold else "within"
        what = f"{ev.change:+.1%}" + (" (less run-queue wait)" if ev.correction is not None else "")
        note = f"{what} is {size} the threshold {threshold:.1%}; the CI [{ev.low:.3f}, {ev.high:.3f}] {side}"
        suspect = self.suspects and verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
        return Step(note, verdict, threshold=threshold, quiet=True, suspect=suspect)


def against_threshold(low: float, high: float, threshold: float) -> Verdict:
    """Where an interval of the ratio lies against the threshold: beyond it (a regression, or an improvement past
    ``1 - threshold``), within it, or reaching both sides of ``1 + threshold`` (not resolved).

    An interval that reaches below ``1 - threshold`` but stays under ``1 + threshold`` is within: an improvement
    not shown fails nothing, so it leaves nothing open."""
    if low > 1.0 + threshold:
        return Verdict.REGRESSION
    if high < 1.0 - threshold:
        return Verdict.IMPROVEMENT
    return Verdict.UNCHANGED if high < 1.0 + threshold else Verdict.NOT_RESOLVED


def _signed_interval(low: float, high: float) -> str:
    return f"[{low - 1.0:+.1%}, {high - 1.0:+.1%}]"


@dataclass(frozen=True)
class AgainstThreshold:
    """Compare-ref: the interval decides against the threshold, in three outcomes (``against_threshold``).

    A regression needs the whole interval beyond ``1 + threshold``: a change as likely below the threshold as
    above it is not one. An interval that reaches both sides is *not resolved*, which ``--gpuperf-strict``
    fails. Judging a confirmation (``case.suspicion``), only the suspected side decides: a suspected
    improvement that the pairs do not show is unchanged, whatever they say of the other side."""

    name: str = "against-threshold"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        ev = case.evidence
        if ev is None:
            return None
        threshold = draft.threshold if draft.threshold is not None else case.settings.threshold
        verdict = against_threshold(ev.low, ev.high, threshold)
        if case.suspicion is Verdict.IMPROVEMENT and verdict is not Verdict.IMPROVEMENT:
            verdict = Verdict.UNCHANGED
        what = f"{ev.change:+.1%} {_signed_interval(ev.low, ev.high)}"
        what += " (less run-queue wait)" if ev.correction is not None else ""
        where = {
            Verdict.REGRESSION: f"beyond the threshold {threshold:.1%}",
            Verdict.IMPROVEMENT: f"beyond the threshold {threshold:.1%}, faster",
            Verdict.UNCHANGED: f"within the threshold {threshold:.1%}",
            Verdict.NOT_RESOLVED: f"not resolved against the threshold {threshold:.1%}: the interval reaches both "
            "sides of it (--gpuperf-strict makes this fail)",
        }[verdict]
        # an open first pair goes on to fresh pairs (Screen), whose verdict says what became of it
        screened = case.suspicion is None and case.settings.confirm_pairs > 0
        quiet = verdict is not Verdict.NOT_RESOLVED or screened
        return Step(f"{what}: {where}", verdict, threshold=threshold, quiet=quiet)


# The share of the threshold (log scale) past which compare-ref's first pair suspects a regression. Its
# process offset spreads its ratio by about 1% on a shared CPU (docs/detection.md), so at half of a 2%
# threshold about 4% of 3% slowdowns read below it and about 18% of unchanged tests above it, each of which
# fresh pairs then clear (benchmarks/detection_plan.py --sessions).
SCREEN_SHARE = 0.5


def screen_boundary(threshold: float, share: float = SCREEN_SHARE) -> float:
    """The ratio above which compare-ref's first pair sends a change to fresh pairs: ``share`` of the threshold,
    on the log scale (``(1 + threshold) ** share``)."""
    return (1.0 + threshold) ** share


@dataclass(frozen=True)
class Screen:
    """Compare-ref: which changes of the first pair fresh process pairs must decide (``suspect``).

    The first pair's rounds share one pair of processes, whose offset (where code and data landed in memory)
    no number of rounds shows. So the first pair only screens: a ratio past half the threshold (log scale,
    ``screen_boundary``), or one its rounds left unresolved, is suspected and the fresh pairs' sequential test
    decides it; one below stays within. A suspected improvement is one the rounds call faster than the
    threshold with an interval below 1, as in baseline mode. Off without confirmation pairs: the rounds'
    outcome stands."""

    name: str = "screen"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        ev = case.evidence
        if ev is None or case.settings.confirm_pairs == 0:
            return None
        threshold = draft.threshold if draft.threshold is not None else case.settings.threshold
        if time_verdict(ev.change, ev.low, ev.high, threshold) is Verdict.IMPROVEMENT:
            note = f"suspected improvement: {ev.change:+.1%} is faster than the threshold {threshold:.1%}"
            return Step(note, Verdict.IMPROVEMENT, quiet=True, suspect=True)
        boundary = screen_boundary(threshold)
        if ev.ratio <= boundary and draft.verdict is not Verdict.NOT_RESOLVED:
            return None
        why = (
            f"{ev.change:+.1%} is past half the threshold ({boundary - 1.0:+.1%})"
            if ev.ratio > boundary else "its rounds left it open"
        )  # fmt: skip
        note = f"suspected regression: {why}, which one pair of processes cannot tell from its offset"
        return Step(note, Verdict.REGRESSION, quiet=True, suspect=True)


def resolved_against(threshold: float, confirming: bool) -> Callable[[float, float], bool]:
    """Compare-ref's first pair: whether its rounds' interval ``(low, high)`` is resolved, so that more rounds
    would not change what becomes of it: it lies on one side of each boundary that decides it (the screen's and
    the improvement's with ``confirming`` pairs to follow, else the threshold's both ways)."""
    upper = screen_boundary(threshold) if confirming else 1.0 + threshold
    lines = (upper, 1.0 - threshold)
    return lambda low, high: not any(low <= line <= high for line in lines)


@dataclass(frozen=True)
class Contention:
    """What taking the run-queue wait out of a time change did (evidence.py): said where it mattered, and
    UNSTABLE where the correction's own uncertainty leaves open a change the wall clock called.

    The verdict before it read the corrected times. A change they confirm stands on any runner, with
    how much contention there was; a change only the wall clock saw is contention, not work, unless the
    correction is too uncertain to rule it out (multi-threaded calls that spin while a sibling waits); a
    change only the corrected times show stands unless a side waited most of its time (``MOSTLY_WAITED``: it
    shared its CPU with more than one other task).
    """

    name: str = "contention"
    three_outcomes: bool = False  # compare-ref: the wall clock is read against the threshold as AgainstThreshold reads

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        ev = case.evidence
        if ev is None or ev.wall is None or ev.correction is None:
            return None
        c = ev.correction
        threshold = draft.threshold if draft.threshold is not None else case.settings.threshold
        wall_verdict = (
            against_threshold(ev.wall.low, ev.wall.high, threshold) if self.three_outcomes
            else time_verdict(ev.wall.change, ev.wall.low, ev.wall.high, threshold)
        )  # fmt: skip
        took = (
            f"{c.wait_share:.0%} of this run's time and {c.reference_wait_share:.0%} of the {case.reference_name}'s "
            f"waited for a CPU ({_wait_source(c.source)})"
        )
        corrected = f"{c.change:+.1%} {_interval(c)} with the wait taken out"
        suspected = draft.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
        if suspected and wall_verdict is draft.verdict:
            return Step(f"{took}; {corrected}: more than the contention explains")
        if suspected and max(c.wait_share, c.reference_wait_share) >= MOSTLY_WAITED:
            # only the correction makes the change, and a side ran in short slices between more than one other task:
            # what it did then was slowed by whatever ran between them, more than the accounting can tell
            return Step(
                f"not judged: {took}; {corrected}, but the wall clock reads {ev.wall.change:+.1%}, and a side that "
                "waited most of its time had too little time on a CPU to tell a change from the load",
                Verdict.UNSTABLE,
            )
        if suspected:
            return Step(f"{took}; {corrected}: the wall clock's {ev.wall.change:+.1%} hid it")
        if wall_verdict is Verdict.UNCHANGED or draft.verdict is Verdict.NOT_RESOLVED:
            return Step(f"{took}; {corrected}", quiet=True)
        open_side = (c.ci_low or 0.0) < 1.0 - threshold if wall_verdict is Verdict.IMPROVEMENT else (
            (c.ci_high or math.inf) > 1.0 + threshold)  # fmt: skip
        if open_side and c.uncertainty >= threshold / 2:
            return Step(
                f"not judged: {took}; {corrected} cannot rule out the wall clock's {ev.wall.change:+.1%}: the "
                f"correction itself is uncertain by {c.uncertainty:.1%} (threads that spin while another waits)",
                Verdict.UNSTABLE,
            )
        return Step(f"{took}; {corrected}: contention, not a change in work (wall clock {ev.wall.change:+.1%})")


def _wait_source(source: str) -> str:
    """How the wait was known, in words."""
    if source == "cpu-time":
        return "off-CPU time, no scheduler accounting here: an estimate"
    return "the kernel's scheduler accounting"


def _interval(c: CorrectedChange) -> str:
    low = "-inf" if c.ci_low is None else f"{c.ci_low - 1.0:+.1%}"
    high = "+inf" if c.ci_high is None else f"{c.ci_high - 1.0:+.1%}"
    return f"[{low}, {high}]"


def time_verdict(change: float, ci_low: float, ci_high: float, threshold: float) -> Verdict:
    if change > threshold and ci_low > 1.0:
        return Verdict.REGRESSION
    if change < -threshold and ci_high < 1.0:
        return Verdict.IMPROVEMENT
    return Verdict.UNCHANGED


@dataclass(frozen=True)
class ConfirmOnly:
    """A confirmation may confirm or clear a suspected change, never turn it into the opposite one."""

    name: str = "confirm-only"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        speed_up = case.suspicion is Verdict.IMPROVEMENT
        if draft.verdict is not (Verdict.REGRESSION if speed_up else Verdict.IMPROVEMENT):
            return None
        suspected, other = ("a speed-up", "slower") if speed_up else ("a slowdown", "faster")
        note = f"the first reading suspected {suspected}: a {other} confirmation only clears it"
        return Step(note, Verdict.UNCHANGED)


@dataclass(frozen=True)
class Health:
    """A measurement the runner marked unstable (throttled, say) is never a regression or an improvement."""

    name: str = "health"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        reason = case.measurement.unstable_reason
        if not reason or draft.verdict in (Verdict.NEW, Verdict.NOT_COMPARABLE, Verdict.NOT_GATED):
            return None
        return Step(f"unstable: {reason}", Verdict.UNSTABLE)


@dataclass(frozen=True)
class MemoryGrowth:
    """Peak memory: a change must pass both the relative threshold and an absolute floor (allocator granularity)."""

    name: str = "memory-growth"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        entry = case.entry
        if entry is None or entry.peak_allocated_bytes is None:
            return None
        base = entry.peak_allocated_bytes
        current = int(case.current)
        diff = current - base
        change = diff / base if base > 0 else (math.inf if diff > 0 else 0.0)
        limit = case.settings.memory_threshold
        floor = case.settings.memory_min_increase_bytes
        past_threshold = abs(change) > limit
        if past_threshold and abs(diff) < floor:
            return Step(
                f"{change:+.1%} is past the memory threshold {limit:.1%}, but {_signed_bytes(diff)} is below the "
                f"{format_bytes(floor)} floor under which peak memory moves with the allocator's granularity",
                Verdict.UNCHANGED, threshold=limit,
            )  # fmt: skip
        verdict = Verdict.UNCHANGED if not past_threshold else Verdict.REGRESSION if diff > 0 else Verdict.IMPROVEMENT
        moved = f"{format_bytes(base)} -> {format_bytes(current)} ({_signed_bytes(diff)})"
        return Step(f"peak allocated {moved}, threshold {limit:.1%}", verdict,
                    threshold=limit, quiet=verdict is Verdict.UNCHANGED)  # fmt: skip


def _signed_bytes(diff: int) -> str:
    """``+160.0 KiB``, ``-4096 B``: a change of memory with its sign."""
    return ("+" if diff >= 0 else "-") + format_bytes(abs(diff))


@dataclass(frozen=True)
class MetricBounds:
    """A metric's hard ``minimum``/``maximum``: a regression with or without a baseline, and final.

    A value or bound that is not a finite number is one too: it would pass every comparison silently.
    """

    name: str = "metric-bounds"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        metric = case.metric
        if metric is None:
            return None
        # NaN satisfies no bound (every comparison with it is false), so it is caught before them
        if bad := not_finite(metric):
            given = ", ".join(f"{k} = {getattr(metric, k):g}" for k in bad)
            note = f"{metric.name}: {given} is not a finite number"
        elif metric.minimum is not None and metric.value < metric.minimum:
            note = f"{metric.name} = {metric.value:g}{metric.unit} is below its minimum {metric.minimum:g}"
        elif metric.maximum is not None and metric.value > metric.maximum:
            note = f"{metric.name} = {metric.value:g}{metric.unit} is above its maximum {metric.maximum:g}"
        else:
            return None
        if metric.description:
            note += f" ({metric.description})"
        return Step(note, Verdict.REGRESSION, final=True, absolute=True)


@dataclass(frozen=True)
class MetricTolerance:
    """A metric against its reference value: absolute tolerance (counts) first, else relative tolerance."""

    name: str = "metric-tolerance"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        metric, ref = case.metric, case.reference_metric
        if metric is None or ref is None:
            return None
        base = ref.value
        worse = (base - metric.value) if metric.better == "higher" else (metric.value - base)
        direction = f"{metric.better} is better"
        if metric.absolute_tolerance is not None:
            tol = metric.absolute_tolerance
            verdict = Verdict.REGRESSION if worse > tol else (Verdict.IMPROVEMENT if worse < 0 else Verdict.UNCHANGED)
            return Step(f"{base:g} -> {metric.value:g} (allowed worsening {tol:g}, {direction})", verdict)
        if metric.tolerance is None:
            return Step(f"{base:g} -> {metric.value:g} (bounds only)", Verdict.UNCHANGED, quiet=True)
        tol = metric.tolerance
        rel = (1.0 if worse > 0 else -1.0 if worse < 0 else 0.0) if base == 0 else worse / abs(base)
        verdict = Verdict.REGRESSION if rel > tol else Verdict.IMPROVEMENT if rel < -tol else Verdict.UNCHANGED
        note = f"{base:g} -> {metric.value:g} (tolerance {tol:.1%}, {direction})"
        if verdict is Verdict.REGRESSION and metric.description:
            note += f": {metric.description}"
        return Step(note, verdict, threshold=tol, quiet=verdict is Verdict.UNCHANGED)
