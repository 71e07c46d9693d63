"""The history's questions, answered once for every caller: ``gpuperf history`` and the Action.

- :func:`find_changes`: the series a filter selects, their change points (``detect.py``, one
  event per change: ``events.py``), those whose first bad commit is at or after ``--since``, and
  the measurements too short to tell;
- :func:`profile_diffs`: the differential profiles recorded with the points of some series, keyed
  as the dashboard links them;
- the new-regression rule lives in ``alerts.py`` (the Action imports it without a store).

The store is reached through :class:`HistoryReader`, the part of ``store.HistoryStore`` these
questions need, so they can be asked of any store that has it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pytest_gpuperf.errors import StoreError
from pytest_gpuperf.history.model import ChangePoint, Series

if TYPE_CHECKING:
    from pytest_gpuperf.history.render import TooShort
    from pytest_gpuperf.history.store import SeriesFilter


class HistoryReader(Protocol):
    """What the history's questions read from a store (``store.HistoryStore`` is one)."""

    @property
    def url(self) -> str: ...

    def load_series(self, where: SeriesFilter | None = None) -> list[Series]: ...

    def load_profile_diffs(self, series: Sequence[Series]) -> dict[tuple[str, str, str], Mapping[str, object]]: ...

    def commit_date_of(self, commit: str) -> str | None: ...


@dataclass(frozen=True)
class ChangesFound:
    """The answer to ``gpuperf history changes``: the series read, their change points, what was too short."""

    series: tuple[Series, ...]
    changes: tuple[ChangePoint, ...]
    too_short: TooShort


def find_changes(reader: HistoryReader, where: SeriesFilter, *, since: str | None = None) -> ChangesFound:
    """The change points of the series ``where`` selects, first bad at or after ``since`` (a time or a commit)."""
    series = reader.load_series(where)
    since_time = resolve_since(since, reader)
    changes = find_all_changes(series)
    if since_time is not None:
        by_key = {s.key: s for s in series}
        changes = [c for c in changes if first_bad_time(by_key[c.key], c) >= since_time]
    return ChangesFound(tuple(series), tuple(changes), too_short_measurements(series))


def find_all_changes(series: Sequence[Series]) -> list[ChangePoint]:
    """The detector (history/detect.py) over every series, one event per change (history/events.py)."""
    from pytest_gpuperf.history.detect import find_changes as detect
    from pytest_gpuperf.history.events import group_events

    return group_events((c for one in series for c in detect(one)), series)


def too_short_measurements(series: Sequence[Series]) -> TooShort:
    """The measurements whose every series is too short for the detector (history/detect.py) to say anything."""
    from pytest_gpuperf.history.detect import shortest, too_short
    from pytest_gpuperf.history.render import TooShort

    measurements: dict[str, bool] = {}
    for one in series:
        k = one.key
        name = f"{k.test}::{k.measurement} [{k.device_class}, {k.branch}]"
        measurements[name] = measurements.get(name, True) and too_short(one)
    short = tuple(name for name, is_short in measurements.items() if is_short)
    return TooShort(short, shortest(), len(measurements))


def resolve_since(text: str | None, reader: HistoryReader) -> str | None:
    """``--since`` as a UTC ISO time: a date or time as given, else the commit date of that commit."""
    from pytest_gpuperf.history.store import utc_timestamp

    if text is None:
        return None
    try:
        return utc_timestamp(text)
    except ValueError:
        pass
    found = reader.commit_date_of(text)
    if found is None:
        raise StoreError(reader.url, f"--since {text!r} is neither an ISO 8601 date nor a commit the store has")
    return found


def first_bad_time(series: Series, change: ChangePoint) -> str:
    """When the first run at the new level was made: its commit date, else its own time."""
    point = series.points[min(change.index, len(series.points) - 1)]
    return point.commit_date or point.started_at


def profile_diffs(reader: HistoryReader, series: Sequence[Series]) -> dict[str, Mapping[str, object]]:
    """Every profile diff recorded with a point of ``series``, keyed as the dashboard links it (``diff_key``)."""
    from pytest_gpuperf.history.dashboard import diff_key

    recorded = reader.load_profile_diffs(series)
    return {
        diff_key(p.run_id, s.key): recorded[(p.run_id, s.key.test, s.key.measurement)]
        for s in series
        for p in s.points
        if (p.run_id, s.key.test, s.key.measurement) in recorded
    }
