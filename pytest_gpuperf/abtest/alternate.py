"""Alternating measurement rounds between a head side and a base side, and when to stop.

Rounds alternate in ABBA order (head first in even pairs, base first in odd
ones) so that a linear drift of machine speed hits both sides alike. Rounds
are short (25 ms by default) because a shared runner's speed changes in steps
that last tens of milliseconds to seconds: a pair inside one step sees the
same machine on both sides, and ``stats.paired_median_ratio`` ignores the few
pairs that straddle a step. Both sides' rounds count against one ``max_time``;
it stops earlier once the CI of the median pair ratio is within the target
precision (after ``min_time`` and MIN_PAIRS pairs).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pytest_gpuperf import stats
from pytest_gpuperf.config import MeasureSettings

MIN_PAIRS = 8  # a 95% CI of a median needs >= 6 pairs; 8 leave room for two straddling ones
ROUNDS_PER_BUDGET = 80  # a round is max_time / this, clamped below
MIN_ROUND_S = 0.005
# Short, so that most pairs fall inside one speed state of a shared runner: on the
# 2-core runner one workload ran at 640 us or at 1000-1250 us in states of 50 ms to
# several seconds (docs/detection.md).
MAX_ROUND_S = 0.025

# One round of about ``budget_s`` seconds on one side: its per-call samples, or None
# when that side stopped (its measurement failed or its test ended).
RoundFn = Callable[[float], "Sequence[float] | None"]


@dataclass
class Alternation:
    """The round medians of both sides, pair by pair."""

    head_rounds: list[float] = field(default_factory=list)
    base_rounds: list[float] = field(default_factory=list)
    complete: bool = True  # False: a side stopped before the end

    @property
    def pairs(self) -> int:
        return min(len(self.head_rounds), len(self.base_rounds))

    def half_width(self) -> float:
        """Relative half-width (log scale) of the CI of the median pair ratio; inf until it exists."""
        n = self.pairs
        _, low, high, _ = stats.paired_median_ratio(self.head_rounds[:n], self.base_rounds[:n])
        if not (math.isfinite(low) and math.isfinite(high)) or low <= 0:
            return math.inf
        return (math.log(high) - math.log(low)) / 2


def round_seconds(settings: MeasureSettings) -> float:
    return min(MAX_ROUND_S, max(MIN_ROUND_S, settings.max_time_s / ROUNDS_PER_BUDGET))


def alternate(head: RoundFn, base: RoundFn, settings: MeasureSettings) -> Alternation:
    """Alternate rounds until precise enough or out of the shared time budget."""
    round_s = round_seconds(settings)
    result = Alternation()
    spent = 0.0  # both sides' rounds, as wall time seen from here
    while True:
        head_first = result.pairs % 2 == 0
        for side in (head, base) if head_first else (base, head):
            started = time.perf_counter()
            samples = side(round_s)
            spent += time.perf_counter() - started
            if not samples:
                result.complete = False
                return result
            (result.head_rounds if side is head else result.base_rounds).append(statistics.median(samples))
        if spent >= settings.max_time_s:
            return result
        measured_enough = result.pairs >= MIN_PAIRS and spent >= settings.min_time_s
        if measured_enough and result.half_width() <= settings.target_precision:
            return result
