"""Alternating measurement rounds between a head side and a base side, and when to stop.

ABBA order, so that a linear drift of machine speed hits both sides alike. Rounds are short because
a shared runner's speed changes in steps lasting tens of milliseconds to seconds: most pairs fall
inside one step, and ``stats.paired_median_ratio`` ignores the few that straddle one.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pytest_gpuperf import stats
from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.measure.stopping import Progress, Stop, StoppingRule

MIN_PAIRS = 8  # a 95% CI of a median needs >= 6 pairs; 8 leave room for two straddling ones
ROUNDS_PER_BUDGET = 80  # a round is max_time / this, clamped below
MIN_ROUND_S = 0.005
MAX_ROUND_S = 0.025  # short: see the module docstring

# One round of about ``budget_s`` seconds on one side: its per-call samples, or None
# when that side stopped (its measurement failed or its test ended).
RoundFn = Callable[[float], "Sequence[float] | None"]


@dataclass
class Alternation:
    """The round medians of both sides, pair by pair."""

    head_rounds: list[float] = field(default_factory=list)
    base_rounds: list[float] = field(default_factory=list)
    complete: bool = True  # False: a side stopped before the end
    stop: Stop | None = None  # why it ended, when no side stopped it
    note: str = ""  # fewer pairs than a verdict needs: how many, and the time limit

    @property
    def pairs(self) -> int:
        return min(len(self.head_rounds), len(self.base_rounds))

    def interval(self) -> tuple[float, float]:
        """The CI of the median pair ratio; infinite until it exists."""
        n = self.pairs
        _, low, high, _ = stats.paired_median_ratio(self.head_rounds[:n], self.base_rounds[:n])
        return low, high

    def half_width(self) -> float:
        """Relative half-width (log scale) of the CI of the median pair ratio; inf until it exists."""
        low, high = self.interval()
        if not (math.isfinite(low) and math.isfinite(high)) or low <= 0:
            return math.inf
        return (math.log(high) - math.log(low)) / 2


def round_seconds(settings: MeasureSettings) -> float:
    return min(MAX_ROUND_S, max(MIN_ROUND_S, settings.max_time_s / ROUNDS_PER_BUDGET))


def stopping_rule(settings: MeasureSettings) -> StoppingRule:
    """The rule of the alternation, counted in pairs of rounds."""
    return StoppingRule.from_settings(settings, round_s=round_seconds(settings), precision_samples=MIN_PAIRS)


def alternate(
    head: RoundFn, base: RoundFn, settings: MeasureSettings, *, spent_s: float = 0.0, base_first: bool = False,
    resolved: Callable[[float, float], bool] | None = None,
) -> Alternation:  # fmt: skip
    """Alternate rounds until the stopping rule says enough, or a side stops.

    ``spent_s``: the head's warm-up, counted against the time limit. ``base_first``
    starts the ABBA order with the base (BAAB...): confirmation pairs take turns.
    ``resolved``: whether the pair ratio's interval ``(low, high)`` settles what the rounds decide
    (``verdict.rules.resolved_against``): the rounds stop there, at the least time and pairs.
    """
    rule = stopping_rule(settings)
    result = Alternation()
    began = time.perf_counter() - spent_s
    spent = 0.0  # both sides' rounds, as wall time seen from here
    last_pair_s = 0.0
    while True:
        now = time.perf_counter()
        progress = Progress(result.pairs, result.pairs, spent, now - began, next_round_s=last_pair_s)
        settled = None if resolved is None else lambda: resolved(*result.interval())
        result.stop = rule.check(progress, result.half_width, settled)
        if result.stop is not None:
            result.note = rule.shortfall_note(result.pairs, "pair") or ""
            return result
        head_first = (result.pairs % 2 == 0) != base_first
        for side in (head, base) if head_first else (base, head):
            samples = side(rule.round_s)
            if not samples:
                result.complete = False
                return result
            (result.head_rounds if side is head else result.base_rounds).append(statistics.median(samples))
        last_pair_s = time.perf_counter() - now
        spent += last_pair_s
