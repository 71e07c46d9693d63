"""When a loop of measurement rounds stops: one rule for every such loop.

The runner's rounds, compare-ref's alternating rounds and the fresh-process re-measure
all ask ``StoppingRule.check`` after each round. The time limit comes first, whatever
the count (the next round must end before it, with a margin); no budget or precision
stop comes before ``min_samples``: 6 is the fewest for which the distribution-free
95% CI of the median exists ((min, max) misses it with probability 2 / 2**n), except a
check's (``check_samples``): its median is compared, never gated.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

from pytest_gpuperf.config import MeasureSettings

# The next round starts only if this many times its expected length fits in the time limit:
# a round a little slower than the last must not meet the hard stop, which fails the test.
LIMIT_MARGIN = 1.25
# A sample of a long call (LONG_SAMPLE_S or more) already spans several scheduler periods. More of them
# in one process narrow that process's interval only; the spread between processes, which decides a
# slow call's verdict, is what the re-measures in fresh processes take. So such a measurement stops
# once LONG_CALL_BUDGET_SHARE of max_time is measured (its min_samples and min_time reached): 1 s of
# the default 2 s, the budget pytest-benchmark gives every test (10 calls of 0.1 s, 6 of 0.3 s).
LONG_SAMPLE_S = 0.02
LONG_CALL_BUDGET_SHARE = 0.5


class Stop(enum.Enum):
    """Why a loop of rounds stopped."""

    PRECISE = "precise enough"
    BUDGET = "time budget spent"
    LIMIT = "time limit reached"
    CAP = "sample cap reached"
    LONG_CALL = "a long call's budget spent"
    CHECKED = "a check's samples taken"
    RESOLVED = "resolved against the threshold"


@dataclass(frozen=True)
class Progress:
    """Where a measurement stands after its latest round."""

    samples: int  # samples so far (pairs of rounds, for the alternation)
    rounds: int
    measured_s: float  # time spent in rounds: what min_time and max_time bound
    elapsed_s: float  # time since the measurement began, warm-up included: what the time limit bounds
    next_round_s: float = 0.0  # the expected length of the next round, and of anything that must follow it
    sample_s: float = 0.0  # the length of one sample now (0: unknown, the long-call stop stays off)


@dataclass(frozen=True)
class StoppingRule:
    """The stopping rule of one loop of rounds; ``round_s`` is the budget of one round."""

    round_s: float
    min_time_s: float
    max_time_s: float
    time_limit_s: float
    target_precision: float
    min_samples: int
    min_rounds: int = 1
    precision_samples: int = 0  # the precision stop also waits for this many samples
    max_samples: int | None = None
    # A reading that only checks another's median (a baseline write's first fresh one, verdict/readings.py)
    # stops a long call at this many samples, before min_samples: it is never gated or written.
    check_samples: int | None = None

    @classmethod
    def from_settings(
        cls,
        settings: MeasureSettings,
        *,
        round_s: float,
        min_rounds: int = 1,
        precision_samples: int = 0,
        max_samples: int | None = None,
    ) -> StoppingRule:
        return cls(
            round_s=round_s,
            min_time_s=settings.min_time_s,
            max_time_s=settings.max_time_s,
            time_limit_s=settings.time_limit_s,
            target_precision=settings.target_precision,
            min_samples=settings.min_samples,
            min_rounds=min_rounds,
            precision_samples=precision_samples,
            max_samples=max_samples,
        )

    def fits(self, elapsed_s: float, more_s: float) -> bool:
        """True if ``more_s`` more seconds, with the margin, end within the time limit."""
        return elapsed_s < self.time_limit_s and elapsed_s + more_s * LIMIT_MARGIN <= self.time_limit_s

    def samples_that_fit(self, elapsed_s: float, per_sample_s: float, reserve_s: float = 0.0) -> int:
        """How many samples of ``per_sample_s`` fit in the time limit, ``reserve_s`` kept free after them."""
        room = self.time_limit_s - elapsed_s - reserve_s * LIMIT_MARGIN
        if per_sample_s <= 0:
            return self.max_samples or 2**31
        return max(0, math.floor(room / (per_sample_s * LIMIT_MARGIN)))

    def check(
        self, progress: Progress, precision: Callable[[], float], resolved: Callable[[], bool] | None = None
    ) -> Stop | None:
        """Why to stop now, or None to measure another round; ``precision`` is called only when it decides.

        ``resolved``: whether what the rounds decide is settled (compare-ref's ratio against the threshold), a
        stop as early as the precision stop's, before it."""
        p = progress
        if p.samples == 0:
            return None  # a measurement takes one round at least; the hard limit guards it
        if not self.fits(p.elapsed_s, p.next_round_s):
            return Stop.LIMIT
        if self.max_samples is not None and p.samples >= self.max_samples:
            return Stop.CAP
        if self.check_samples is not None and p.sample_s >= LONG_SAMPLE_S and p.samples >= self.check_samples:
            return Stop.CHECKED
        if p.samples < self.min_samples:
            return None
        if p.measured_s >= self.max_time_s:
            return Stop.BUDGET
        long_call_budget_s = max(self.min_time_s, self.max_time_s * LONG_CALL_BUDGET_SHARE)
        if p.sample_s >= LONG_SAMPLE_S and p.measured_s >= long_call_budget_s:
            return Stop.LONG_CALL
        if p.rounds < self.min_rounds or p.measured_s < self.min_time_s or p.samples < self.precision_samples:
            return None
        if resolved is not None and resolved():
            return Stop.RESOLVED
        return Stop.PRECISE if precision() <= self.target_precision else None

    def shortfall_note(self, count: int, what: str = "sample") -> str | None:
        """The note on a result with fewer than ``min_samples`` samples (None when it has enough)."""
        if count >= self.min_samples:
            return None
        return (
            f"{count} {what}{'' if count == 1 else 's'}, fewer than the {self.min_samples} a verdict needs, "
            f"within the {self.time_limit_s:g} s time limit (--gpuperf-time-limit)"
        )
