"""Where a point sits on a chart: the commit axis shared by a page's charts, the value scale and its ticks.

Every chart of one page (time, memory, metrics; every device class) uses one commit axis,
so a step in the time series lines up with the memory series' point of the same commit.
The axis is ordinal: one slot per commit, in commit order (commit date, then the first
run's time), so a burst of commits is not squeezed against a quiet month. Several runs of
one commit in one series share its slot, spread a little so each stays visible.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from pytest_gpuperf.history.dashboard.errors import DashboardError
from pytest_gpuperf.history.model import Point, Series
from pytest_gpuperf.report.units import format_value

_SPREAD = 0.6  # of a commit's slot, for the runs of one commit in one series
_TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0))
_BYTE_UNITS = (("GiB", 1024.0**3), ("MiB", 1024.0**2), ("KiB", 1024.0), ("B", 1.0))


def parse_time(text: str, *, what: str) -> datetime:
    """An ISO 8601 time; a naive one is read as UTC. DashboardError names ``what`` when it is not one."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))  # 3.10 does not read "Z"
    except (ValueError, TypeError, AttributeError):
        raise DashboardError(f"{what}: {text!r} is not an ISO 8601 time") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def point_time(point: Point, series: Series) -> datetime:
    """When a point's commit was made (its run's time where the store has no commit date)."""
    what = f"run {point.run_id} of {series.key.label}"
    return parse_time(point.commit_date or point.started_at, what=what)


@dataclass(frozen=True)
class CommitAxis:
    """The commits of a page's series in order, each with its slot on the x axis."""

    commits: tuple[str, ...]
    dates: tuple[datetime, ...]  # each commit's date, for the tick labels

    @classmethod
    def of(cls, series: Iterable[Series]) -> CommitAxis:
        first: dict[str, tuple[datetime, datetime]] = {}
        for s in series:
            for p in s.points:
                key = (point_time(p, s), parse_time(p.started_at, what=f"run {p.run_id} of {s.key.label}"))
                if p.commit not in first or key < first[p.commit]:
                    first[p.commit] = key
        ordered = sorted(first, key=lambda c: (*first[c], c))
        return cls(tuple(ordered), tuple(first[c][0] for c in ordered))

    def __len__(self) -> int:
        return len(self.commits)

    def slots(self, series: Series) -> list[float]:
        """Each point's position in commit slots (0 = the first commit's centre)."""
        index = {c: i for i, c in enumerate(self.commits)}
        positions: list[float] = []
        start = 0
        points = series.points
        while start < len(points):
            end = start
            while end < len(points) and points[end].commit == points[start].commit:
                end += 1
            runs = end - start
            slot = index[points[start].commit]
            positions += [slot + ((k + 1) / (runs + 1) - 0.5) * _SPREAD if runs > 1 else slot for k in range(runs)]
            start = end
        return positions


@dataclass(frozen=True)
class ValueScale:
    """The y axis of one chart: its limits, ticks and how a value reads in the chart's unit."""

    low: float
    high: float
    ticks: tuple[float, ...]
    factor: float  # the tick labels' divisor
    label_unit: str  # the axis title's unit: "ms", "MiB", or the metric's own unit
    unit: str  # the series' unit, for exact values in hover titles

    @classmethod
    def of(cls, values: Sequence[float], unit: str) -> ValueScale:
        finite = [v for v in values if math.isfinite(v)] or [0.0]
        lo, hi = min(finite), max(finite)
        pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
        if min(finite) >= 0 > lo:  # times, bytes and counts: no axis below zero for a padding
            lo = 0.0
        factor, label_unit = _axis_unit(max(abs(lo), abs(hi)), unit)
        # matplotlib's locator (already a dependency) picks round ticks; it is imported only here
        from matplotlib.ticker import MaxNLocator

        ticks = tuple(float(t) * factor for t in MaxNLocator(nbins=5).tick_values(lo / factor, hi / factor))
        ticks = tuple(t for t in ticks if lo <= t <= hi)
        return cls(lo, hi, ticks, factor, label_unit, unit)

    def tick_label(self, value: float) -> str:
        return f"{value / self.factor:.6g}"

    def exact(self, value: float) -> str:
        """``value`` in the axis's unit, four significant digits (hover titles: thousands per page, so cheap)."""
        if self.factor == 1.0 and self.label_unit == self.unit:
            return format_value(value, self.unit)
        return f"{value / self.factor:.4g} {self.label_unit}"


def _axis_unit(top: float, unit: str) -> tuple[float, str]:
    key = unit.strip().lower()
    table = _TIME_UNITS if key in ("ns", "nanoseconds") else _BYTE_UNITS if key in ("b", "byte", "bytes") else None
    if table is None:
        return 1.0, unit
    return next(((f, name) for name, f in table if top >= f), (1.0, table[-1][0]))
