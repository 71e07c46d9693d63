"""One event per change: the statistics of one measurement that moved at one place, as one change point.

A step in a test moves its median, mean, minimum and tail percentiles together; the detector
(``detect.py``) finds it in each series on its own, sometimes a commit apart. Reported as they
are, one regression is five rows, five alerts. Here they become one event, named after the
measurement's **gated statistic** (the one the gate judges: ``time.p50`` for times,
``memory.peak_allocated`` for peak memory, a metric's own value for a metric), with the
others attached as ``supporting`` evidence. Families never merge: a time change and a memory
change at the same commit are two events. A GPU's recorded state (``device.sm_clock`` and the
rest) belongs to the time's family: a clock that dropped where the time rose supports its event.

Two change points of one family are the same event when they point the same way and their
commit ranges (``last_good`` to ``first_bad``) overlap or lie within :data:`PLACEMENT_SLACK`
commits of each other. The event's commits, levels and interval are its lead's: the gated
statistic's change. Where the gated statistic did not move, the others' change points are no
event: a tail percentile or a mean, without an interval of its own and noisier than the median,
moves with single slow runs where the median does not. Only where the gated statistic's series
was not given (``--statistic time.p90``) does the most significant of the others lead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from pytest_gpuperf.history.model import ChangePoint, Series, SeriesKey

# Commits between two statistics' ranges that still place them at one change: p50 and p90
# of one step often disagree by a commit (``a..b`` against ``b..c``).
PLACEMENT_SLACK = 1
_GATED = {"time": "time.p50", "memory": "memory.peak_allocated"}
# The device's state while a test ran (a GPU's clocks, power, temperature) explains its time and is not the code's:
# its change points only support the time's, never lead an event of their own.
_SUPPORTS = {"device": "time"}


def family(statistic: str) -> str:
    """The statistics that describe one quantity: ``time`` (with the device's state), ``memory``, or a metric."""
    head = statistic.partition(".")[0]
    head = _SUPPORTS.get(head, head)
    return head if head in _GATED else statistic


def gated_statistic(statistic: str) -> str:
    """The statistic an event of ``statistic``'s family is reported under."""
    return _GATED.get(family(statistic), statistic)


def is_gated(statistic: str) -> bool:
    return gated_statistic(statistic) == statistic


def measurement_key(key: SeriesKey) -> tuple[str, str, str, str]:
    """(test, measurement, device class, branch): what an alert issue and a dashboard index row are about."""
    return key.test, key.measurement, key.device_class, key.branch


def _event_group(key: SeriesKey) -> tuple[str, str, str, str, str]:
    return (*measurement_key(key), family(key.statistic))


def group_events(changes: Iterable[ChangePoint], series: Sequence[Series]) -> list[ChangePoint]:
    """``changes`` (each of one series in ``series``) as events: leads carrying their supporting change points.

    Events are ordered by their measurement, then by where they happened.
    """
    positions = _commit_positions(series)
    gated_present = {_event_group(s.key) for s in series if is_gated(s.key.statistic)}
    grouped: dict[tuple[str, ...], list[ChangePoint]] = {}
    for change in changes:
        grouped.setdefault(_event_group(change.key), []).append(change)
    events: list[ChangePoint] = []
    for group, members in sorted(grouped.items()):
        where = positions.get(group, {})

        def span(c: ChangePoint, where: dict[str, int] = where) -> tuple[int, int]:
            return where.get(c.last_good, c.index - 1), where.get(c.first_bad, c.index)

        members.sort(key=lambda c: (span(c), c.key.statistic))
        clusters: list[list[ChangePoint]] = []
        for change in members:
            lo, _ = span(change)
            for cluster in clusters:
                if _same_direction(cluster[0], change) and lo <= max(span(c)[1] for c in cluster) + PLACEMENT_SLACK:
                    cluster.append(change)
                    break
            else:
                clusters.append([change])
        events.extend(e for cluster in clusters if (e := _event(cluster, group in gated_present)) is not None)
    return events


def _same_direction(a: ChangePoint, b: ChangePoint) -> bool:
    return (a.change > 0) == (b.change > 0)


def _event(cluster: list[ChangePoint], gated_given: bool) -> ChangePoint | None:
    gated = [c for c in cluster if is_gated(c.key.statistic)]
    if not gated and gated_given:
        return None  # the gated statistic was looked at and did not move here
    lead = gated[0] if gated else min(cluster, key=lambda c: (c.p_value, -abs(c.change), c.key.statistic))
    others = tuple(sorted((c for c in cluster if c is not lead), key=lambda c: c.key.statistic))
    return dataclasses.replace(lead, supporting=others)


def _commit_positions(series: Sequence[Series]) -> dict[tuple[str, ...], dict[str, int]]:
    """Each event group's commits in order (from its longest series: all statistics share the runs)."""
    longest: dict[tuple[str, ...], Series] = {}
    for s in series:
        group: tuple[str, ...] = _event_group(s.key)
        if group not in longest or len(s.points) > len(longest[group].points):
            longest[group] = s
    positions: dict[tuple[str, ...], dict[str, int]] = {}
    for group, s in longest.items():
        where: dict[str, int] = {}
        for p in s.points:
            where.setdefault(p.commit, len(where))
        positions[group] = where
    return positions
