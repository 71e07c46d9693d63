"""``gpuperf history baselines`` and the HTML report's trends: the baselines' versions as series.

The versions come from git (``baselines_git``); each measurement's versions become one
:class:`~pytest_gpuperf.history.model.Series` of the chosen time statistic, and the history's
own detector (``detect.find_changes``) finds where its level changed, as it does for a store's
series. ``report.history`` renders the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.errors import HistoryError
from pytest_gpuperf.history.baselines_git import BaselineVersion, read_baselines
from pytest_gpuperf.history.model import ChangePoint, Point, Series, SeriesKey
from pytest_gpuperf.report.history import History, Mark, Trend

DEFAULT_THRESHOLD = 0.10  # the smallest relative change shown as a step
DEFAULT_PERSIST = 1  # versions after the first at a new level that a change must last
RUNNER = "baselines"  # the points' runner: the versions were written by baseline updates


@dataclass(frozen=True)
class BaselineHistory:
    """The series of a baselines folder, their change points, and what the reader could not say."""

    series: tuple[Series, ...]
    changes: tuple[ChangePoint, ...]
    commits: int
    skipped: tuple[str, ...]
    too_short: tuple[str, ...]  # measurements with too few versions for the detector to tell
    fewest: int  # the versions a series needs


def baseline_history(
    baselines: Path | str,
    *,
    metric: str = "p50",
    threshold: float = DEFAULT_THRESHOLD,
    persist: int = DEFAULT_PERSIST,
    match: str | None = None,
    rev: str = "HEAD",
) -> BaselineHistory:
    """Every entry's versions over the commits that touched ``baselines``, with its change points.

    ``threshold`` is the detector's ``min_change``; ``persist`` the versions after the first at a
    new level that a change must last (the detector's ``min_runs`` is ``persist + 1``).
    """
    from pytest_gpuperf.history.detect import DetectorConfig, find_changes, shortest, too_short

    if persist < 0:
        raise ValueError(f"persist must be >= 0, got {persist}")
    config = DetectorConfig(min_change=threshold, min_runs=persist + 1)
    log = read_baselines(baselines, rev=rev, match=match)
    series = tuple(
        _series(device_class, key, versions, metric, rev) for (device_class, key), versions in log.by_entry().items()
    )
    changes = tuple(c for s in series for c in find_changes(s, config))
    short = tuple(f"{s.key.test}::{s.key.measurement} [{s.key.device_class}]" for s in series if too_short(s, config))
    return BaselineHistory(series, changes, log.commits, log.skipped, short, shortest(config))


def _series(device_class: str, key: str, versions: Sequence[BaselineVersion], metric: str, rev: str) -> Series:
    from pytest_gpuperf.history.ingest import median_interval

    test, _, name = key.rpartition("::")
    points = []
    for v in versions:
        stats = v.entry.stats
        low, high = median_interval(v.entry.samples_ns, stats.median_ns, None) if v.entry.samples_ns else (None, None)
        point = Point(run_id=v.commit, commit=v.commit, started_at=v.date, runner=RUNNER, value=stats.get(metric),
                      samples=stats.count, baseline_update=True, commit_date=v.date)  # fmt: skip
        # the entry's samples give the median's interval: the detector weighs each version by it
        points.append(dataclasses.replace(point, ci_low=low, ci_high=high) if metric in ("p50", "median") else point)
    return Series(SeriesKey(test, name, f"time.{metric}", device_class, rev), "ns", "lower", tuple(points))


def trends(history: BaselineHistory) -> History:
    """What ``report.history`` renders: each series' values and where its changes began."""
    marks: dict[SeriesKey, list[Mark]] = {}
    for c in history.changes:
        marks.setdefault(c.key, []).append(Mark(c.index, c.first_bad, c.change, c.gradual))
    found = tuple(
        Trend(
            key=f"{s.key.test}::{s.key.measurement}",
            device_class=s.key.device_class,
            commits=tuple(p.commit for p in s.points),
            dates=tuple(p.commit_date or p.started_at for p in s.points),
            values_ns=tuple(p.value for p in s.points),
            marks=tuple(marks.get(s.key, ())),
        )
        for s in history.series
    )
    return History(found, history.commits, history.skipped, _short_note(history))


def _short_note(history: BaselineHistory) -> str:
    if not history.too_short:
        return ""
    names = ", ".join(history.too_short)
    return f"too few versions to find a change (fewer than {history.fewest}): {names}\n"


def history_or_none(baselines: Path | str, *, metric: str = "p50") -> History | None:
    """The trends a report can show next to this run, or None where there are none (no git, no commit)."""
    try:
        return trends(baseline_history(baselines, metric=metric))
    except HistoryError:
        return None
