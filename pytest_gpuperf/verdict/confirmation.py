"""Confirmation as a step of the verdict: what is suspected, and what the extra readings made of it.

The engines gather readings (fresh processes, or process pairs in compare-ref); what they mean is
decided here. A comparison is *suspected* when a ``suspect`` step called a regression or an improvement
and no later rule cleared it; readings confirm or clear it, in the same direction only. Improvements
are held to a stricter standard (``confirming_gate``): a missed one costs a user nothing, a false one
credits a change with a speed-up it does not have.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from pytest_gpuperf.config import GateSettings
from pytest_gpuperf.model import (
    CONFIRMATION_STEP,
    Comparison,
    Environment,
    Kind,
    Measurement,
    MeasurementResult,
    Note,
    Verdict,
)
from pytest_gpuperf.stats import format_level
from pytest_gpuperf.verdict import evidence as ev
from pytest_gpuperf.verdict import pairs
from pytest_gpuperf.verdict.judge import Reference, time_comparison
from pytest_gpuperf.verdict.pipeline import Step, apply_step
from pytest_gpuperf.verdict.rulesets import RuleSet

SUSPECTED = frozenset({Verdict.REGRESSION, Verdict.IMPROVEMENT})

# The confidence at which readings confirm a suspected improvement. With few confirming readings (3 to 9
# fresh pairs), at 95% an unchanged test whose pairs happen to lean one way passes now and then; for a
# regression the gate accepts that to catch small slowdowns, for an improvement nothing is gained by it:
# a missed one costs nothing. At 99% unchanged code was still credited now and then (docs/detection.md).
IMPROVEMENT_CONFIDENCE = 0.995


def suspicion(c: Comparison) -> Verdict | None:
    """The change a suspecting step called, if it still stands (REGRESSION or IMPROVEMENT); else None.

    A change a host guard doubted (now UNSTABLE) is still suspected."""
    called = next((step.verdict for step in reversed(c.explanation) if step.suspect), None)
    if called not in SUSPECTED:
        return None
    return called if c.verdict in (called, Verdict.UNSTABLE) else None


def confirming_gate(gate: GateSettings, suspected: Verdict, first: Comparison | None = None) -> GateSettings:
    """The settings a confirmation of ``suspected`` is planned and judged with: an improvement's
    confidence is raised to IMPROVEMENT_CONFIDENCE; an automatic threshold stays the one ``first``, the
    suspecting reading's comparison, was judged at."""
    if gate.auto_threshold is not None and first is not None and first.threshold is not None:
        gate = dataclasses.replace(gate, threshold=first.threshold, auto_threshold=None)
    if suspected is Verdict.IMPROVEMENT and gate.confidence < IMPROVEMENT_CONFIDENCE:
        return dataclasses.replace(gate, confidence=IMPROVEMENT_CONFIDENCE)
    return gate


def judge_pairs(
    m: Measurement, reference: Reference, gate: GateSettings, rules: RuleSet, environment: Environment,
    ratios: Sequence[float], suspected: Verdict, detail: str, errors: Sequence[float] = (),
) -> Comparison:  # fmt: skip
    """Compare-ref: the time comparison judged on fresh process pairs' ratios by the confirmation rules, on the
    sequential test's last look (``evidence.confirmation_pairs``).

    ``errors``: each pair's own standard error, a floor on the pairs' spread (``stats.replicate_spread``)."""
    gate = confirming_gate(gate, suspected)
    evidence = ev.confirmation_pairs(ratios, gate, detail, errors, improvement=suspected is Verdict.IMPROVEMENT)
    return time_comparison(m, reference, gate, rules, environment, confirmation=evidence, suspicion=suspected)


def time_of(result: MeasurementResult) -> Comparison:
    """The time comparison of ``result``: the one confirmations are about."""
    return next(c for c in result.comparisons if c.kind is Kind.TIME)


def oriented(ratios: list[float], suspected: Verdict) -> list[float]:
    """Ratios turned so that the suspected change reads above 1 (an improvement's are inverted)."""
    return pairs.oriented(ratios, suspected is Verdict.IMPROVEMENT)


def oriented_threshold(threshold: float, suspected: Verdict) -> float:
    """The threshold on ``oriented`` ratios: an improvement needs a ratio below ``1 - threshold``."""
    return pairs.oriented_threshold(threshold, suspected is Verdict.IMPROVEMENT)


def confirmed(result: MeasurementResult, note: str, verdict: Verdict | None = None) -> MeasurementResult:
    """``result`` with a ``confirmation`` step on its time comparison (and the note on the measurement)."""
    time_c = time_of(result)
    explained = apply_step(time_c, CONFIRMATION_STEP, Step(note, verdict))
    comparisons = tuple(explained if c is time_c else c for c in result.comparisons)
    measured = dataclasses.replace(result.measurement, notes=(*result.measurement.notes, Note(note)))
    return dataclasses.replace(result, measurement=measured, comparisons=comparisons)


def upheld_by(suspected: Verdict) -> Callable[[MeasurementResult], bool]:
    """Whether a reading calls the suspected change again: the readings go on until one does not."""
    return lambda reading: time_of(reading).verdict is suspected


def by_remeasures(first: Comparison, readings: Sequence[MeasurementResult], suspected: Verdict) -> MeasurementResult:
    """Baseline mode: what fresh-process re-measures made of the first measurement's ``suspected`` change.

    The last reading decides: the same change confirms it, an unstable one leaves it unjudged, and a
    reading the other way clears the suspicion without claiming the opposite change (it stands unchanged).
    """
    last = readings[-1]
    verdict = time_of(last).verdict
    if verdict not in (suspected, Verdict.UNSTABLE):
        verdict = Verdict.UNCHANGED
    history = " then ".join("n/a" if c.change is None else f"{c.change:+.1%}"
                            for c in (first, *(time_of(r) for r in readings)))  # fmt: skip
    return confirmed(last, remeasure_note(suspected, verdict, len(readings), history), verdict)


def by_pairs(result: MeasurementResult, judged: Comparison, head_ns: float, note: str) -> MeasurementResult:
    """Compare-ref: ``result`` with the fresh pairs' judgement of its time comparison (``judge_pairs``).

    The pairs' figures replace the first pair's: they decided. The base's is the head's (``head_ns``, over
    the pairs) divided by the pairs' ratio, so that the row's columns agree, which the sides' medians over
    the pairs do not.
    """
    first = time_of(result)
    base_ns = head_ns / (1.0 + judged.change) if judged.change is not None else first.baseline
    replaced = dataclasses.replace(
        first, current=head_ns, baseline=base_ns, change=judged.change,
        ci_low=judged.ci_low, ci_high=judged.ci_high, p_value=judged.p_value, detectable=judged.detectable,
        evidence=judged.evidence, explanation=(*first.explanation, *judged.explanation),
    )  # fmt: skip
    comparisons = tuple(replaced if c is first else c for c in result.comparisons)
    return confirmed(dataclasses.replace(result, comparisons=comparisons), note, judged.verdict)


def remeasure_note(suspected: Verdict, verdict: Verdict, count: int, history: str) -> str:
    """Baseline mode: what ``count`` re-measures in fresh processes made of the suspicion."""
    if verdict is suspected:
        return f"confirmed by {count} re-measure(s) in fresh processes: {history}"
    if verdict is Verdict.UNSTABLE:
        return f"not judged on re-measure {count}: {history}"
    return f"suspected {suspected.value} not confirmed on re-measure {count}: {history}"


def pairs_note(suspected: Verdict, verdict: Verdict, count: int, *, confidence: float) -> str:
    """Compare-ref: what ``count`` fresh process pairs made of the first pair's suspicion."""
    improvement = suspected is Verdict.IMPROVEMENT
    level = f" at {format_level(confidence)} (the level improvements are confirmed at)" if improvement else ""
    if verdict is suspected:
        return f"confirmed by {count} fresh process pairs{level}"
    if verdict is Verdict.NOT_RESOLVED:
        return (
            f"not resolved: {count} fresh process pairs, the most --gpuperf-confirm-pairs allows, left the change "
            "on both sides of the threshold"
        )
    return f"the first pair's suspected {suspected.value} was not confirmed{level}: {count} fresh pairs ruled it out"


def unusable_note(suspected: Verdict, measured: int, problems: str) -> str:
    """Compare-ref: too few pairs could measure. A suspected improvement is then not reported as one."""
    return f"{suspected.value} not confirmed in fresh process pairs ({measured} measured: {problems})"


def unconfirmed_verdict(c: Comparison) -> Verdict:
    """What stands when no confirmation could be taken: the first pair's own outcome against the threshold, as
    it was before the screen suspected it (a regression only where its interval lay beyond the threshold), an
    improvement not claimed; unstable stays unstable."""
    if c.verdict is Verdict.UNSTABLE:
        return c.verdict
    steps = c.explanation
    last = max((i for i, step in enumerate(steps) if step.suspect), default=None)
    before = steps[last - 1].verdict if last else Verdict.UNCHANGED
    return Verdict.UNCHANGED if before is Verdict.IMPROVEMENT else before
