"""When fresh process pairs have decided a compare-ref suspicion: a sequential plan with a look after each pair.

A look stops when the pairs confirm the change or rule it out, both at a stricter level (``interim_confidence``:
looking more than once must not add false alarms), or, at the first look, when the pairs to come could
not make it (``futile``). At the planned count an open verdict (``undecided``) earns an extension of half
as many pairs again. docs/statistics.md gives the reasoning and the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_gpuperf import stats

MIN_CONFIRMING_PAIRS = 3  # fewer independent pair ratios give no usable interval
INTERIM_STRICTNESS = 5  # an early stop allows a fifth of the final look's error rate: 99% where the gate asks 95%


def interim_confidence(confidence: float) -> float:
    """The level an early look decides at, for a final look at ``confidence`` (see INTERIM_STRICTNESS)."""
    return 1.0 - (1.0 - confidence) / INTERIM_STRICTNESS


def pair_waves(planned: int) -> tuple[int, ...]:
    """The looks of a confirmation: after the first ``MIN_CONFIRMING_PAIRS`` together (no interval exists
    with fewer), then after each further pair, through the extension (``last_pair``)."""
    first = min(planned, MIN_CONFIRMING_PAIRS)
    return (first, *range(first + 1, last_pair(planned) + 1))


def last_pair(planned: int) -> int:
    """The most pairs a confirmation measures: the planned ones and an extension of half as many again."""
    return planned + max(1, planned // 2)


def pairs_done(
    ratios: Sequence[float], planned: int, *, pairs: int, threshold: float, confidence: float,
    errors: Sequence[float] = (),
) -> bool:  # fmt: skip
    """The stopping rule for compare-ref confirmation pairs, after ``planned`` pairs (see the module docstring).

    ``errors``: each pair's own standard error (log scale), a floor on the pairs' spread (``stats.replicate_spread``).
    """
    if len(ratios) < MIN_CONFIRMING_PAIRS:
        return True  # too few pairs could measure: more of the same workers will not help
    if planned >= last_pair(pairs):
        return True  # the extension's last pair
    interim = interim_confidence(confidence)
    if confirmed(ratios, threshold, interim, errors) or cleared(ratios, threshold, interim, errors):
        return True
    if planned == pairs:
        return not undecided(ratios, threshold, confidence, errors)
    # futility only at the first look: at later ones it would clear real regressions that the
    # extension would have confirmed (benchmarks/detection_plan.py)
    return planned == min(pairs, MIN_CONFIRMING_PAIRS) and futile(ratios, threshold, pairs)


def confirmed(ratios: Sequence[float], threshold: float, confidence: float, errors: Sequence[float] = ()) -> bool:
    """The estimate above the threshold and the interval above 1: the regression the gate would report."""
    ratio, low, _, _ = stats.replicate_ratio_ci(ratios, confidence, errors)
    return ratio - 1.0 > threshold and low > 1.0


def futile(ratios: Sequence[float], threshold: float, planned: int) -> bool:
    """True when the pairs still to come could only confirm a regression by reading far above these.

    The verdict over all ``planned`` pairs needs their geometric mean ratio above ``1 + threshold``.
    With ``k`` ratios whose log-mean is ``l``, the other ``planned - k`` would need a log-mean of
    ``(planned * L - k * l) / (planned - k)`` (``L = log(1 + threshold)``). If that lies a whole
    threshold or more above ``l`` (when ``l <= L * k / planned``), the rest would have to disagree
    with the first wave by more than the smallest change the gate reports. It can only clear a suspicion.
    """
    k = len(ratios)
    if k == 0 or k >= planned:
        return False
    mean_log = sum(math.log(r) for r in ratios) / k
    return mean_log <= math.log1p(threshold) * k / planned


def cleared(ratios: Sequence[float], threshold: float, confidence: float, errors: Sequence[float] = ()) -> bool:
    """The interval's upper end lies below ``1 + threshold``: a change of the threshold's size is ruled out."""
    if len(ratios) < MIN_CONFIRMING_PAIRS:
        return False
    _, _, high, _ = stats.replicate_ratio_ci(ratios, confidence, errors)
    return high < 1.0 + threshold


def undecided(ratios: Sequence[float], threshold: float, confidence: float, errors: Sequence[float] = ()) -> bool:
    """Not a regression, yet the estimate is above half the threshold and the interval reaches above it."""
    if len(ratios) < MIN_CONFIRMING_PAIRS:
        return False
    ratio, low, high, _ = stats.replicate_ratio_ci(ratios, confidence, errors)
    change = ratio - 1.0
    regression = change > threshold and low > 1.0
    return not regression and change > threshold / 2 and high > 1.0 + threshold
