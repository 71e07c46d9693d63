"""What every report shows for a measurement: its headline comparison and its order.

The renderers format these; they only read the verdicts the gate put in ``MeasurementResult``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_gpuperf.model import (
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
    return Headline(result, statistic, now, base, change, result.verdict, others)


def ordered(results: Iterable[MeasurementResult]) -> list[MeasurementResult]:
    """Worst verdict first, then by key, so regressions lead every report."""
    return sorted(results, key=lambda r: (_RANK[r.verdict], r.measurement.key))


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
UNJUDGED = (Verdict.UNSTABLE, Verdict.NOT_GATED, Verdict.NOT_COMPARABLE)


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
        f"They are not a pass: {_advice(session, {r.verdict for r in unjudged})}, or make such runs fail with "
        "--gpuperf-strict (--gpuperf-explain says why)"
    )


def _advice(session: SessionResults, verdicts: set[Verdict]) -> str:
    """What to do about measurements of ``verdicts`` that could not be judged."""
    if session.compare_ref:
        return "run it again on a quieter runner"
    advice = []
    if verdicts - {Verdict.NOT_COMPARABLE}:
        advice.append("gate a busy runner with --gpuperf-compare-ref, which stays reliable under load")
    if Verdict.NOT_COMPARABLE in verdicts:
        advice.append("record baselines on this device class with --gpuperf-update-baseline")
    return "; ".join(advice)


def named(keys: list[str], shown: int = 2) -> str:
    """``a, b, +3 more``: the first ``shown`` of ``keys`` and how many more."""
    more = len(keys) - shown
    return ", ".join(keys[:shown]) + (f", +{more} more" if more > 0 else "")


def counts_line(session: SessionResults) -> str:
    """``1 regression, 2 improvements, 5 unchanged, 1 new, 0 not comparable`` (+ unstable, not gated if any)."""
    counts = verdict_counts(session)
    shown = [Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED, Verdict.NEW, Verdict.NOT_COMPARABLE]
    shown += [v for v in (Verdict.UNSTABLE, Verdict.NOT_GATED) if counts[v]]
    return ", ".join(count_of(counts[v], v) for v in shown)
