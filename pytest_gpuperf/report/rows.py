"""What every report shows for a measurement: its headline comparison and its order.

The renderers format these; they only read the verdicts the gate put in ``MeasurementResult``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_gpuperf.model import (
    CONFIRMATION_STEP,
    ENERGY_METRIC,
    VERDICT_ORDER,
    Comparison,
    Kind,
    MeasurementResult,
    SessionResults,
    Verdict,
)

_RANK = {v: i for i, v in enumerate(VERDICT_ORDER)}


def split_key(test_id: str) -> tuple[str, str]:
    """``tests/test_mm.py::test_x[a]`` -> (``tests/test_mm.py``, ``test_x[a]``)."""
    path, sep, name = test_id.partition("::")
    return (path, name) if sep else ("", test_id)


def time_comparison(result: MeasurementResult) -> Comparison | None:
    """The comparison on time (``time.p50`` or whichever statistic the gate used)."""
    return next((c for c in result.comparisons if c.kind is Kind.TIME), None)


def energy_comparison(result: MeasurementResult) -> Comparison | None:
    """The comparison of the energy per call, where it was measured (``--gpuperf-energy``)."""
    return next((c for c in result.comparisons if c.kind is Kind.METRIC and c.metric == f"metric.{ENERGY_METRIC}"),
                None)  # fmt: skip


def energy_source(result: MeasurementResult) -> str:
    """``NVML energy counter``: where the energy per call came from, in words ('' where unknown)."""
    state = result.measurement.device_state
    return state.energy_source.label if state is not None and state.energy_source is not None else ""


@dataclass(frozen=True)
class Headline:
    """One measurement reduced to the numbers a summary line shows."""

    result: MeasurementResult
    statistic: str  # "p50", "mean" ...
    now_ns: float
    baseline_ns: float | None
    change: float | None
    verdict: Verdict
    others: tuple[Comparison, ...]  # non-time comparisons worth a line of their own
    verdict_label: str  # the verdict as the row's last cell words it (``headline_verdict``)


def headline(result: MeasurementResult) -> Headline:
    timing = time_comparison(result)
    stats = result.measurement.stats
    if timing is not None:
        statistic = timing.metric.split(".", 1)[1]
        now, base, change = timing.current, timing.baseline, timing.change
    else:
        statistic, now = "p50", stats.median_ns
        base = result.baseline.stats.median_ns if result.baseline is not None else None
        change = None
    others = tuple(
        c for c in result.comparisons if c is not timing and c.verdict not in (Verdict.UNCHANGED, Verdict.NEW)
    )
    return Headline(result, statistic, now, base, change, result.verdict, others, headline_verdict(result, timing))


def verdict_label(c: Comparison, result: MeasurementResult | None = None) -> str:
    """A comparison's verdict as a report words it.

    ``not confirmed`` for a suspected change that fresh readings did not confirm (it stands
    unchanged), so a large significant change never reads as a plain ``unchanged`` beside its
    figures; a metric new to a measurement whose baseline has others this run did not report
    says which (``result``): ``compare_compile`` names its first call by inductor's cache state.
    """
    if c.verdict is Verdict.UNCHANGED and any(step.rule == CONFIRMATION_STEP for step in c.explanation):
        return "not confirmed"
    if result is not None and (instead := _instead(c, result)):
        return f"{c.verdict.value} ({instead})"
    return c.verdict.value


def _instead(c: Comparison, result: MeasurementResult) -> str:
    """``the baseline has metric.X instead`` for a new metric beside baseline metrics this run lacks; else ""."""
    if c.kind is not Kind.METRIC or c.verdict is not Verdict.NEW or result.baseline is None:
        return ""
    now = {m.name for m in result.measurement.metrics}
    gone = [f"metric.{m.name}" for m in result.baseline.metrics if m.name not in now]
    return f"the baseline has {', '.join(gone)} instead" if gone else ""


def headline_verdict(result: MeasurementResult, timing: Comparison | None) -> str:
    """The measurement's verdict beside its time figures, named by the comparison that gave it where that is
    not the time: a memory regression on a faster time reads ``regression (memory.peak_allocated)``, not a
    bare ``regression`` next to ``-37.1%``."""
    if timing is not None and timing.verdict is result.verdict:
        return verdict_label(timing)
    decided = next((c for c in result.comparisons if c.verdict is result.verdict), None)
    if decided is None:
        return result.verdict.value
    instead = _instead(decided, result)
    return f"{result.verdict.value} ({decided.metric}{'; ' + instead if instead else ''})"


def ordered(results: Iterable[MeasurementResult]) -> list[MeasurementResult]:
    """Worst verdict first, then by key, so regressions lead every report."""
    return sorted(results, key=lambda r: (_RANK[r.verdict], r.measurement.key))


def reference_column(session: SessionResults) -> str:
    """What a table calls the side a measurement is compared with: the base commit in compare-ref, else the baseline."""
    return "base" if session.compare_ref else "baseline"


def verdict_counts(session: SessionResults) -> Counter[Verdict]:
    return Counter(r.verdict for r in session.results)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# The verdicts that are nouns ("2 regressions"); the others are adjectives and take no plural ("2 not gated").
_NOUNS = frozenset({Verdict.REGRESSION, Verdict.IMPROVEMENT})


def count_of(n: int, verdict: Verdict) -> str:
    """``n`` measurements of ``verdict`` in words: ``2 regressions``, ``2 unchanged``, ``2 not gated``."""
    return plural(n, verdict.value) if verdict in _NOUNS else f"{n} {verdict.value}"


# What a run was asked to judge but could not: not a pass, and the run says so first (``unjudged_line``).
UNJUDGED = (Verdict.UNSTABLE, Verdict.NOT_GATED, Verdict.NOT_RESOLVED, Verdict.NOT_COMPARABLE)


def deciding_rule(c: Comparison) -> str | None:
    """The rule whose step gave ``c`` its verdict: the last one that changed it (None: no rule changed it)."""
    previous, rule = Verdict.UNCHANGED, None
    for step in c.explanation:
        if step.verdict is not previous:
            rule = step.rule
        previous = step.verdict
    return rule


def _why_unjudged(result: MeasurementResult) -> tuple[Verdict, str]:
    c = next(c for c in result.comparisons if c.verdict is result.verdict)
    return result.verdict, deciding_rule(c) or ""


def unjudged_line(session: SessionResults) -> str | None:
    """``3 of 5 measurements could not be judged: 2 unstable (busy-runner), 1 not gated (noisy-baseline). ...``

    How many measurements the run could not judge, the rules that said so, and what to do; None if none."""
    unjudged = [r for r in session.results if r.verdict in UNJUDGED]
    if not unjudged:
        return None
    reasons = Counter(_why_unjudged(r) for r in unjudged)
    parts = []
    for verdict in UNJUDGED:
        rules = [(rule, n) for (v, rule), n in reasons.items() if v is verdict]
        if rules:
            total = sum(n for _, n in rules)
            named = ", ".join(rule if n == total else f"{n} {rule}" for rule, n in rules if rule)
            parts.append(f"{count_of(total, verdict)} ({named})" if named else count_of(total, verdict))
    return (
        f"{len(unjudged)} of {plural(len(session.results), 'measurement')} could not be judged: {', '.join(parts)}. "
        f"They are not a pass: {_advice(session, unjudged, set(reasons))}, or make such runs fail with "
        "--gpuperf-strict (--gpuperf-explain says why)"
    )


# The rule that says a reference has the test but no number for it (compare-ref: the base could not run it).
_NO_REFERENCE_RULE = "reference"
# Baseline mode: what to do about a measurement a rule left unjudged, by the rule's name (verdict/rules.py and
# measure/host/cpu/rules.py name them); a rule not listed gets the last advice.
_RUN_AGAIN = "run it again (the notes say what moved)"
_BASELINE_ADVICE = {
    "machine-state": "the machine ran in another state than when the baseline was written: run it again, or write "
    "the baseline again if it was written in a slower one",
    "contention": "the correction for the run-queue wait was too uncertain (threads that spin while another waits): "
    "run again, or give such calls fewer threads than the runner has CPUs",
    "noisy-baseline": "write the noisy baselines again with --gpuperf-update-baseline",
    "busy-runner": "write the baselines written busy again with --gpuperf-update-baseline",
}


def _advice(session: SessionResults, unjudged: list[MeasurementResult], reasons: set[tuple[Verdict, str]]) -> str:
    """What to do about the measurements that could not be judged, by why they could not: their (verdict,
    deciding rule) ``reasons``."""
    verdicts = {verdict for verdict, _ in reasons}
    judged = {(v, rule) for v, rule in reasons if v is not Verdict.NOT_COMPARABLE}
    if session.compare_ref:
        advice = []
        if (Verdict.NOT_GATED, _NO_REFERENCE_RULE) in judged:  # an import error, a failing test: not the runner's load
            advice.append(f"the base ({session.compare_ref}) could not run some: each one's note says why")
        if Verdict.NOT_RESOLVED in verdicts:
            advice.append(_unresolved_advice(unjudged))
        if {r for r in judged if r[0] is not Verdict.NOT_RESOLVED} - {(Verdict.NOT_GATED, _NO_REFERENCE_RULE)}:
            advice.append("run it again on a quieter runner")
    else:
        advice = list(dict.fromkeys(_BASELINE_ADVICE.get(rule, _RUN_AGAIN) for _, rule in judged))
    if Verdict.NOT_COMPARABLE in verdicts:
        advice.append(_other_device_advice(session, [r for r in unjudged if r.verdict is Verdict.NOT_COMPARABLE]))
    return "; ".join(advice)


def _unresolved_advice(unjudged: list[MeasurementResult]) -> str:
    """What would resolve the not-resolved comparisons: more fresh pairs where their detectable change says
    the budget was too small (``--gpuperf-confirm-pairs=N``, the most any needs), else nothing but a threshold
    further from their change: they resolve the threshold, and their change lies close to it."""
    found = [c.detectable for r in unjudged for c in r.comparisons
             if c.verdict is Verdict.NOT_RESOLVED and c.detectable is not None]  # fmt: skip
    short = [d.needed for d in found if d.needed is None or d.needed > d.readings]
    if short or not found:
        known = [n for n in short if n is not None]
        more = f"--gpuperf-confirm-pairs={max(known)}" if known else "a larger --gpuperf-confirm-pairs"
        return f"give the fresh pairs more room ({more}) or a quieter runner"
    return "their changes lie close to the threshold, within what the pairs resolve: the threshold decides"


def _other_device_advice(session: SessionResults, results: list[MeasurementResult]) -> str:
    """What differs (the device classes) and how to get a reference of this one: a quieter runner would not help."""
    here = session.environment.device_class
    there = sorted({r.baseline.environment.device_class for r in results
                    if r.baseline is not None and r.baseline.environment is not None} - {here})  # fmt: skip
    differs = f"measured on device class {here}, the reference on {', '.join(there)}" if there else (
        f"measured on device class {here}, the reference on another device class")  # fmt: skip
    where = "compare with a base measured on this device class, or " if session.compare_ref else ""
    return f"{differs}: {where}record baselines on this device class with --gpuperf-update-baseline"


def contention_line(session: SessionResults) -> str | None:
    """``3 of 24 measurements waited for a CPU (up to 61% of their time); their verdicts read the times less that
    wait`` (model/scheduling.py): how much of a busy runner's time was contention; None: none was."""
    shares = [c.correction.wait_share for r in session.results for c in r.comparisons if c.correction is not None]
    if not shares:
        return None
    return (f"{len(shares)} of {plural(len(session.results), 'measurement')} waited for a CPU (up to "
            f"{max(shares):.0%} of their time); their verdicts read the times less that wait")  # fmt: skip


def named(keys: list[str], shown: int = 2) -> str:
    """``a, b, +3 more``: the first ``shown`` of ``keys`` and how many more."""
    more = len(keys) - shown
    return ", ".join(keys[:shown]) + (f", +{more} more" if more > 0 else "")


def counts_line(session: SessionResults) -> str:
    """``1 regression, 2 improvements, 5 unchanged, 1 new, 0 not comparable`` (+ unstable, not gated if any)."""
    counts = verdict_counts(session)
    shown = [Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED, Verdict.NEW, Verdict.NOT_COMPARABLE]
    shown += [v for v in (Verdict.UNSTABLE, Verdict.NOT_GATED, Verdict.NOT_RESOLVED) if counts[v]]
    return ", ".join(count_of(counts[v], v) for v in shown)
