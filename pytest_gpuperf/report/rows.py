"""What every report shows for a measurement: its headline comparison and its order.

The renderers format these; they only read the verdicts the gate put in ``MeasurementResult``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_gpuperf.model import VERDICT_ORDER, Comparison, Kind, MeasurementResult, SessionResults, Verdict

_RANK = {v: i for i, v in enumerate(VERDICT_ORDER)}


def split_key(test_id: str) -> tuple[str, str]:
    """``tests/test_mm.py::test_x[a]`` -> (``tests/test_mm.py``, ``test_x[a]``)."""
    path, sep, name = test_id.partition("::")
    return (path, name) if sep else ("", test_id)


def time_comparison(result: MeasurementResult) -> Comparison | None:
    """The comparison on time (``time.p50`` or whichever statistic the gate used)."""
    return next((c for c in result.comparisons if c.kind is Kind.TIME), None)


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


def counts_line(session: SessionResults) -> str:
    """``1 regression, 2 improvements, 5 unchanged, 1 new, 0 not comparable`` (+ unstable, not gated if any)."""
    counts = verdict_counts(session)
    shown = [Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED, Verdict.NEW, Verdict.NOT_COMPARABLE]
    shown += [v for v in (Verdict.UNSTABLE, Verdict.NOT_GATED) if counts[v]]
    return ", ".join(count_of(counts[v], v) for v in shown)
