"""How many calls a differential profile takes: it grows until the rows are resolved or the budget is spent.

A pass profiles ``calls`` calls on each side; while the explanation is not yet resolved
(profiling/explain.py: no cause, or causes short of half the change) the next pass takes twice as
many calls, up to ``most``, and only if its expected cost (the last pass's, scaled by its calls)
still fits ``budget_s`` with what was spent. Each pass replaces the one before (its trace too).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gpuperf.model import WhyFinding

FIRST_CALLS = 5  # the first pass: enough for a t-interval on each side
MOST_CALLS = 40  # per side, in the last pass
BUDGET_S = 15.0  # profiling time of one regression's explanation, both sides, all passes
STORED_CALLS = 10  # calls of the profile a baseline entry keeps (update mode)
# ... but no more of them than fit in this many seconds (one at least: its counts are still exact
# differences, its times get no interval): ten calls of a second each would cost a long-call suite's
# baseline write more than its measurement.
STORED_BUDGET_S = 1.0
_SETTLED: frozenset[WhyFinding | None] = frozenset({"explained", "no-intervals", None})


@dataclass(frozen=True)
class ProfilePlan:
    first: int = FIRST_CALLS
    most: int = MOST_CALLS
    budget_s: float = BUDGET_S

    def next_calls(self, calls: int, spent_s: float, last_pass_s: float, finding: WhyFinding | None) -> int | None:
        """The next pass's calls per side, or None: the explanation is settled, or more would pass the budget."""
        if finding in _SETTLED:
            return None
        more = min(2 * calls, self.most)
        if more <= calls or spent_s + last_pass_s * more / calls > self.budget_s:
            return None
        return more
