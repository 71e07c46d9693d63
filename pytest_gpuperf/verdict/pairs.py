"""When fresh process pairs have decided a compare-ref suspicion: the sequential test after each pair.

The first ``MIN_CONFIRMING_PAIRS`` pairs are measured together (no interval exists with fewer), then one at a
time, each followed by a look (``verdict.sequential``): the pairs stop once their ratio lies beyond the
threshold or within it, with the error rates at the threshold stated there, or at the budget
(``--gpuperf-confirm-pairs``), where a ratio still open is not resolved. docs/statistics.md gives the figures.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_gpuperf.verdict import sequential
from pytest_gpuperf.verdict.sequential import Look, Outcome

MIN_CONFIRMING_PAIRS = sequential.FIRST_LOOK  # fewer independent pair ratios give no usable interval


# A change of exactly the threshold may be called within this many times as often as it may be called beyond:
# a false alarm fails a pull request, a pass at the threshold itself is the edge of what the gate promises.
# Four times (10% against 2.5%) ends a suspicion of unchanged code after 3.3 pairs instead of 4.6 where pairs
# spread by 0.73%, 5.3 instead of 8.0 where they spread by 1.5% (benchmarks/detection_plan.py).
WITHIN_SHARE = 4.0


def error_rate(confidence: float) -> float:
    """The one-sided error rate at the threshold of the beyond side (a false alarm there): 2.5% at 95%."""
    return (1.0 - confidence) / 2.0


# A suspected improvement that the pairs do not show is not claimed, and that costs nothing: its pairs stop as
# soon as their estimate leaves no improvement likely, with no error rate to keep on that side (half the time
# at the threshold), instead of running the budget where pairs spread too far to rule one out.
IMPROVEMENT_WITHIN_RATE = 0.5


def within_error_rate(confidence: float, improvement: bool = False) -> float:
    """The one-sided error rate at the threshold of the within side (a pass there): 10% at 95%; for a
    suspected improvement ``IMPROVEMENT_WITHIN_RATE``."""
    return IMPROVEMENT_WITHIN_RATE if improvement else min(0.5, WITHIN_SHARE * error_rate(confidence))


def pair_waves(budget: int) -> tuple[int, ...]:
    """The looks of a confirmation: after the first ``MIN_CONFIRMING_PAIRS`` together, then after each pair."""
    first = min(budget, MIN_CONFIRMING_PAIRS)
    return (first, *range(first + 1, budget + 1))


def pairs_look(
    ratios: Sequence[float], *, budget: int, threshold: float, confidence: float, errors: Sequence[float] = (),
    improvement: bool = False,
) -> Look:  # fmt: skip
    """The sequential test's look at ``ratios`` (turned so that the suspected change reads above 1)."""
    within = within_error_rate(confidence, improvement)
    return sequential.look(ratios, threshold, budget, error_rate(confidence), errors, within)


def pairs_done(
    ratios: Sequence[float], planned: int, *, budget: int, threshold: float, confidence: float,
    errors: Sequence[float] = (), improvement: bool = False,
) -> bool:  # fmt: skip
    """The stopping rule of a confirmation after ``planned`` pairs: the look resolved the ratio, or the budget is
    spent, or too few pairs could measure (more of the same workers will not help).

    ``errors``: each pair's own standard error (log scale), a floor on the pairs' spread (``stats.replicate_spread``).
    """
    if len(ratios) < MIN_CONFIRMING_PAIRS or planned >= budget:
        return True
    look = pairs_look(ratios, budget=budget, threshold=threshold, confidence=confidence, errors=errors,
                      improvement=improvement)  # fmt: skip
    return look.outcome is not Outcome.OPEN


def oriented(ratios: Sequence[float], improvement: bool) -> list[float]:
    """Ratios turned so that the suspected change reads above 1 (an improvement's are inverted)."""
    return [1.0 / r for r in ratios] if improvement else list(ratios)


def oriented_threshold(threshold: float, improvement: bool) -> float:
    """The threshold on ``oriented`` ratios: an improvement needs a ratio below ``1 - threshold``."""
    return threshold / max(1e-9, 1.0 - threshold) if improvement else threshold
