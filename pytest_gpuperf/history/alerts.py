"""Which change points are new regressions: what ``gpuperf history changes`` exits 1 on, the Action alerts on.

A change point travels as a :class:`ChangeRow`: the typed, flat row that ``changes --format
json`` writes (``render.change_to_json``) and the Action reads back (``action/alert_text.py``).
The rule is :func:`is_new_regression`; :func:`new_regressions` keeps one row per issue.
Nothing here touches a store or the detector, so the Action imports it with the standard library
and numpy only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_gpuperf.history.model import ChangeKind, ChangePoint


@dataclass(frozen=True)
class ChangeRow:
    """One change point (an event, led by its gated statistic) as ``changes --format json`` writes it."""

    test: str
    measurement: str
    statistic: str
    device_class: str
    branch: str
    unit: str
    last_good: str
    first_bad: str
    # None where not finite (a level of zero, an unbounded interval): said as unknown
    change: float | None
    ci_low: float | None
    ci_high: float | None
    before: float | None
    after: float | None
    p_value: float | None
    kind: ChangeKind
    runs_after: int
    gradual: bool
    supporting: tuple[tuple[str, float | None], ...] = ()  # (statistic, change) of the same event elsewhere
    pending: bool = False  # too few runs at a level yet (``ChangePoint.pending``): no alert until confirmed

    @classmethod
    def of(cls, c: ChangePoint) -> ChangeRow:
        """The row of a change point the detector found, as its JSON carries it."""
        k = c.key
        return cls(
            test=k.test, measurement=k.measurement, statistic=k.statistic, device_class=k.device_class,
            branch=k.branch, unit=c.unit, last_good=c.last_good, first_bad=c.first_bad, change=_finite(c.change),
            ci_low=_finite(c.ci_low), ci_high=_finite(c.ci_high), before=_finite(c.before), after=_finite(c.after),
            p_value=c.p_value, kind=c.kind, runs_after=c.runs_after, gradual=c.gradual,
            pending=c.pending,
            supporting=tuple((s.key.statistic, _finite(s.change)) for s in c.supporting),
        )  # fmt: skip

    @property
    def label(self) -> str:
        """The series, as ``SeriesKey.label`` names it."""
        return f"{self.test}::{self.measurement} {self.statistic} [{self.device_class}, {self.branch}]"

    @property
    def measurement_key(self) -> tuple[str, str, str, str]:
        """What an issue is about, with the first bad commit: the measurement, never one of its statistics."""
        return (self.test, self.measurement, self.device_class, self.branch)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def is_new_regression(row: ChangeRow, recent: int) -> bool:
    """A confirmed regression whose first bad run is among the newest ``recent`` runs of its series.

    A pending one (a level at the series' end with fewer runs than the detector's
    ``settle_runs``) raises nothing yet: two slowed runs at the newest commits read the same
    as a new level's first two, and the next run tells them apart.
    """
    return row.kind is ChangeKind.REGRESSION and not row.pending and row.runs_after <= recent


def new_regressions(rows: Iterable[ChangeRow], recent: int) -> list[ChangeRow]:
    """The new regressions (:func:`is_new_regression`), one per measurement and first bad commit.

    Two events of one measurement at one first bad commit (its time and its memory) are one
    issue: the first (``changes`` lists time first) leads, the other's statistics support it.
    """
    found: dict[tuple[str, ...], ChangeRow] = {}
    for row in rows:
        if not is_new_regression(row, recent):
            continue
        key = (*row.measurement_key, row.first_bad)
        lead = found.get(key)
        if lead is None:
            found[key] = row
        else:
            extra = ((row.statistic, row.change), *row.supporting)
            found[key] = dataclasses.replace(lead, supporting=lead.supporting + extra)
    return list(found.values())
