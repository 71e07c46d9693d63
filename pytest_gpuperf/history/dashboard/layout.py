"""What the site holds, before any HTML: its pages, their series and change points, the profile diffs they link.

A page shows one series group: a test's measurement on a branch, with a chart per
statistic (time first, then memory, then metrics) and in each chart a line per device
class. Runs of different device classes never share a line. The input is checked here,
once: a change point must belong to a series given and point at its first bad commit,
and a recorded profile diff must be a ProfileDiff's results-file JSON, or the build
stops with an error naming the series or the diff.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_gpuperf.baseline.naming import safe_name
from pytest_gpuperf.history.dashboard.axes import parse_time
from pytest_gpuperf.history.dashboard.errors import DashboardError
from pytest_gpuperf.history.model import ChangeKind, ChangePoint, Point, Series, SeriesKey
from pytest_gpuperf.model import ProfileDiff
from pytest_gpuperf.report.codec import from_json

SERIES_DIR, DIFFS_DIR, ASSETS_DIR = "series", "diffs", "assets"
# Device classes' colours, in the order of their names; red and green are the change points'.
PALETTE = ("#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
_FAMILIES = ("time.", "memory.", "metric.")


@dataclass(frozen=True)
class GroupKey:
    """One page: a test's measurement on a branch."""

    test: str
    measurement: str
    branch: str

    @classmethod
    def of(cls, key: SeriesKey) -> GroupKey:
        return cls(key.test, key.measurement, key.branch)

    @property
    def file_name(self) -> str:
        # the baselines' naming: readable, and distinct for distinct keys (a hash where the slug is lossy)
        return safe_name(f"{self.test}::{self.measurement}@{self.branch}") + ".html"


@dataclass(frozen=True)
class DiffPage:
    """A recorded profile diff and the run it belongs to."""

    key: str  # f"{run_id}/{test}::{measurement}"
    diff: ProfileDiff
    point: Point
    series: Series
    path: str  # relative to the site's root

    @property
    def href_from_page(self) -> str:
        return f"../{self.path}"


@dataclass
class StatisticChart:
    """One chart of a page: a statistic, one series per device class."""

    statistic: str
    series: list[Series] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return "stat-" + safe_name(self.statistic)


@dataclass
class Group:
    """A page's content."""

    key: GroupKey
    charts: list[StatisticChart] = field(default_factory=list)
    changes: dict[SeriesKey, list[ChangePoint]] = field(default_factory=dict)  # each series' marks
    events: list[ChangePoint] = field(default_factory=list)  # one per change, with its supporting change points

    @property
    def path(self) -> str:
        return f"{SERIES_DIR}/{self.key.file_name}"

    def all_series(self) -> list[Series]:
        return [s for chart in self.charts for s in chart.series]


@dataclass
class Site:
    """The pages to write, with the lookups the renderers need."""

    groups: list[Group]
    diffs: dict[str, DiffPage]  # by profile_diffs key
    colours: dict[str, str]  # device class -> line colour
    _by_key: dict[GroupKey, Group] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_key = {g.key: g for g in self.groups}

    def diff_of(self, point: Point, series: Series) -> DiffPage | None:
        return self.diffs.get(diff_key(point.run_id, series.key)) if point.has_profile_diff else None

    def change_diff(self, change: ChangePoint, series: Series) -> DiffPage | None:
        """The profile diff recorded at the change: the first one from its first bad run on, before the next change."""
        following = [c.index for c in self.changes_of(series) if c.index > change.index]
        end = min(following, default=len(series.points))
        return next(
            (page for p in series.points[change.index : end] if (page := self.diff_of(p, series)) is not None), None
        )

    def changes_of(self, series: Series) -> list[ChangePoint]:
        group = self.group_of(series.key)
        return group.changes.get(series.key, []) if group is not None else []

    def group_of(self, key: SeriesKey) -> Group | None:
        return self._by_key.get(GroupKey.of(key))


def diff_key(run_id: str, key: SeriesKey) -> str:
    """The key of a run's profile diff in ``build_site(profile_diffs=...)``."""
    return f"{run_id}/{key.test}::{key.measurement}"


def statistic_order(statistic: str) -> tuple[int, int, str]:
    """Time first (its median first of all), then memory, then metrics, then anything else by name."""
    family = next((i for i, prefix in enumerate(_FAMILIES) if statistic.startswith(prefix)), len(_FAMILIES))
    return family, 0 if statistic == "time.p50" else 1, statistic


def plan(
    series: Sequence[Series],
    changes: Sequence[ChangePoint],
    profile_diffs: Mapping[str, Mapping[str, object]] | None,
) -> Site:
    """Group, order and check the input; decode the profile diffs the points link to.

    ``changes`` are events (``history.events``): each is marked on its own series and on
    those of its supporting change points, and listed once.
    """
    by_key: dict[SeriesKey, Series] = {}
    for s in series:
        if s.key in by_key:
            raise DashboardError(f"series {s.key.label} is given twice")
        by_key[s.key] = s
        _check_times(s)
    groups: dict[GroupKey, Group] = {}
    for s in sorted(by_key.values(), key=lambda s: (statistic_order(s.key.statistic), s.key.device_class)):
        group = groups.setdefault(GroupKey.of(s.key), Group(GroupKey.of(s.key)))
        chart = next((c for c in group.charts if c.statistic == s.key.statistic), None)
        if chart is None:
            chart = StatisticChart(s.key.statistic)
            group.charts.append(chart)
        chart.series.append(s)
    for event in changes:
        for change in event.with_supporting():
            _check_change(change, by_key)
            groups[GroupKey.of(change.key)].changes.setdefault(change.key, []).append(change)
        groups[GroupKey.of(event.key)].events.append(event)
    for group in groups.values():
        for found in group.changes.values():
            found.sort(key=lambda c: c.index)
    classes = sorted({key.device_class for key in by_key})
    colours = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(classes)}
    ordered = sorted(groups.values(), key=lambda g: (g.key.test, g.key.measurement, g.key.branch))
    return Site(ordered, _diff_pages(by_key.values(), profile_diffs or {}), colours)


def _check_times(series: Series) -> None:
    """Every run's times are ISO 8601: the pages order and date the runs by them."""
    for p in series.points:
        for text in (p.started_at, p.commit_date):
            if text is not None:
                parse_time(text, what=f"run {p.run_id} of {series.key.label}")


def _check_change(change: ChangePoint, by_key: Mapping[SeriesKey, Series]) -> None:
    series = by_key.get(change.key)
    if series is None:
        raise DashboardError(f"change point {change.last_good[:10]}..{change.first_bad[:10]}: "
                             f"no series {change.key.label} was given")  # fmt: skip
    if not 0 <= change.index < len(series.points):
        raise DashboardError(f"change point in {change.key.label}: index {change.index} is outside its "
                             f"{len(series.points)} points")  # fmt: skip
    at = series.points[change.index].commit
    if at != change.first_bad:
        raise DashboardError(f"change point in {change.key.label}: point {change.index} is commit {at}, "
                             f"not its first bad commit {change.first_bad}")  # fmt: skip
    if not isinstance(change.kind, ChangeKind):
        raise DashboardError(f"change point in {change.key.label}: kind {change.kind!r} is not a ChangeKind")


def _diff_pages(series: Iterable[Series], documents: Mapping[str, Mapping[str, object]]) -> dict[str, DiffPage]:
    pages: dict[str, DiffPage] = {}
    for s in series:
        for point in s.points:
            key = diff_key(point.run_id, s.key)
            if not point.has_profile_diff or key in pages or key not in documents:
                continue
            pages[key] = DiffPage(key, _decode(key, documents[key]), point, s, f"{DIFFS_DIR}/{safe_name(key)}.html")
    return pages


def _decode(key: str, document: Mapping[str, object]) -> ProfileDiff:
    try:
        diff = from_json(ProfileDiff, document)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DashboardError(f"profile diff {key!r} is not a ProfileDiff's results-file JSON: "
                             f"{type(exc).__name__}: {exc}") from None  # fmt: skip
    if not isinstance(diff, ProfileDiff):
        raise DashboardError(f"profile diff {key!r} is not a ProfileDiff")
    return diff
