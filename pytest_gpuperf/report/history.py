"""``gpuperf history``: how each baseline moved over the commits that touched the baselines folder.

Every version of every baseline file is read from git (GitPython) with the
store's own ``codec.load_document``, oldest commit first, so files written by
an older schema are migrated on the way. A *step* is a change of the chosen
statistic larger than ``max(threshold, noise)`` against the level before it
that *persists*: the following ``persist`` versions stay beyond the tolerance
on the same side. A lone outlier that comes back is not a step; a change in the
newest version(s) cannot be confirmed yet and is reported as unconfirmed.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_gpuperf.baseline.codec import load_document
from pytest_gpuperf.errors import BaselineError, HistoryError
from pytest_gpuperf.files import write_atomic
from pytest_gpuperf.model import BaselineEntry
from pytest_gpuperf.report.rows import plural
from pytest_gpuperf.report.units import format_change, format_time

DEFAULT_THRESHOLD = 0.10
DEFAULT_PERSIST = 1


@dataclass(frozen=True)
class Point:
    """One version of one baseline entry: the commit that wrote it and its value."""

    commit: str
    date: str  # ISO 8601 commit date
    summary: str
    value_ns: float
    noise: float | None
    entry: BaselineEntry


@dataclass(frozen=True)
class Step:
    """A lasting change that began at ``points[index]``."""

    index: int
    commit: str
    before_ns: float
    after_ns: float
    change: float
    confirmed: bool


@dataclass(frozen=True)
class Series:
    device_class: str
    key: str
    points: tuple[Point, ...]
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class History:
    series: tuple[Series, ...]
    commits: int
    skipped: tuple[str, ...]  # file versions that could not be read, with the reason


def find_steps(
    values: Sequence[float],
    noises: Sequence[float | None],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    persist: int = DEFAULT_PERSIST,
) -> list[tuple[int, float, float, bool]]:
    """(index, level before, level after, confirmed) for each lasting change in ``values``."""
    if persist < 0:
        raise ValueError(f"persist must be >= 0, got {persist}")
    steps: list[tuple[int, float, float, bool]] = []
    if not values:
        return steps
    level, level_noise = values[0], noises[0] or 0.0
    for i in range(1, len(values)):
        tolerance = max(threshold, noises[i] or 0.0, level_noise)
        change = values[i] / level - 1.0
        if abs(change) <= tolerance:
            continue
        following = values[i + 1 : i + 1 + persist]
        if all((w / level - 1.0) * change > 0 and abs(w / level - 1.0) > tolerance for w in following):
            new_level = statistics.median(values[i : i + 1 + len(following)])
            steps.append((i, level, new_level, len(following) == persist))
            level, level_noise = new_level, noises[i] or 0.0
    return steps


def _repo(baselines: Path) -> tuple[Any, PurePosixPath]:
    import git

    # The folder may be gone from the work tree and still have a history: search from its nearest parent.
    start = next((p for p in (baselines, *baselines.resolve().parents) if p.exists()), baselines)
    try:
        repo = git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise HistoryError(f"{baselines} is not inside a git repository", path=baselines) from None
    top = Path(repo.working_tree_dir or ".").resolve()
    try:
        relative = baselines.resolve().relative_to(top)
    except ValueError:
        raise HistoryError(f"{baselines} is outside the repository at {top}", path=baselines) from None
    return repo, PurePosixPath(relative.as_posix())


def _file_versions(commit: Any, folder: PurePosixPath) -> Iterator[tuple[str, Any]]:
    """(device class, blob) of every baseline file in ``commit`` under ``folder``."""
    try:
        tree = commit.tree / str(folder) if str(folder) != "." else commit.tree
    except KeyError:
        return  # the folder was deleted in this commit
    for item in tree.traverse():
        parts = (
            PurePosixPath(item.path).relative_to(folder).parts if str(folder) != "." else PurePosixPath(item.path).parts
        )
        if item.type == "blob" and len(parts) == 2 and parts[1].endswith(".json") and not parts[1].startswith("."):
            yield parts[0], item


def collect_history(
    baselines: Path | str,
    *,
    metric: str = "p50",
    threshold: float = DEFAULT_THRESHOLD,
    persist: int = DEFAULT_PERSIST,
    match: str | None = None,
    rev: str = "HEAD",
) -> History:
    """Every entry's versions over the commits that touched ``baselines``, with its steps."""
    folder = Path(baselines)
    repo, relative = _repo(folder)
    path_filter = [str(relative)] if str(relative) != "." else []
    try:
        commits = list(repo.iter_commits(rev, paths=path_filter, reverse=True))
    except Exception as exc:  # GitCommandError on an unknown rev or an empty repository
        raise HistoryError(f"cannot list the commits of {folder} at {rev}: {exc}", path=folder, rev=rev) from None
    if not commits:
        raise HistoryError(f"no commit touches {folder}", path=folder, rev=rev)
    parsed: dict[str, dict[str, BaselineEntry]] = {}  # by blob sha: unchanged files are read once
    skipped: list[str] = []
    points: dict[tuple[str, str], list[Point]] = {}
    for commit in commits:
        for device_class, blob in _file_versions(commit, relative):
            if blob.hexsha not in parsed:
                where = f"{commit.hexsha[:12]}:{blob.path}"
                try:
                    parsed[blob.hexsha] = load_document(blob.data_stream.read(), where)
                except BaselineError as exc:
                    parsed[blob.hexsha] = {}
                    skipped.append(str(exc))
            for key, entry in parsed[blob.hexsha].items():
                if match is not None and match not in key:
                    continue
                series = points.setdefault((device_class, key), [])
                if series and series[-1].entry == entry:
                    continue  # this commit changed another entry or file
                series.append(
                    Point(
                        commit=commit.hexsha,
                        date=commit.committed_datetime.isoformat(),
                        summary=str(commit.summary),
                        value_ns=entry.stats.get(metric),
                        noise=entry.noise,
                        entry=entry,
                    )
                )
    result = []
    for (device_class, key), pts in sorted(points.items()):
        found = find_steps([p.value_ns for p in pts], [p.noise for p in pts], threshold=threshold, persist=persist)
        steps = tuple(Step(i, pts[i].commit, before, after, after / before - 1, ok) for i, before, after, ok in found)
        result.append(Series(device_class, key, tuple(pts), steps))
    return History(tuple(result), len(commits), tuple(skipped))


def history_or_none(baselines: Path | str, *, metric: str = "p50") -> History | None:
    """The history a report can show next to this run, or None where there is none (no git, no commit)."""
    try:
        return collect_history(baselines, metric=metric)
    except HistoryError:
        return None


def render_history(history: History, *, metric: str = "p50") -> str:
    """A table per measurement: commit, date, value, change against the previous version, steps."""
    lines = [f"{plural(len(history.series), 'measurement')} over {plural(history.commits, 'commit')} ({metric})"]
    for series in history.series:
        starts = {s.index: s for s in series.steps}
        lines += ["", f"{series.key}  [{series.device_class}]"]
        lines.append(f"  {'commit':<12}  {'date':<25}  {metric:>10}  {'change':>8}  step")
        previous: float | None = None
        for i, p in enumerate(series.points):
            change = format_change(p.value_ns / previous - 1) if previous else "-"
            step = starts.get(i)
            mark = ""
            if step is not None:
                arrow = "▲" if step.change > 0 else "▼"
                mark = f"{arrow} step {format_change(step.change)} began here"
                mark += "" if step.confirmed else " (unconfirmed: newest version)"
            lines.append(
                f"  {p.commit[:12]:<12}  {p.date[:25]:<25}  {format_time(p.value_ns):>10}  {change:>8}  {mark}"
            )
            previous = p.value_ns
    for reason in history.skipped:
        lines.append(f"skipped: {reason}")
    return "\n".join(lines) + "\n"


def time_scale(values: Sequence[float]) -> tuple[float, str]:
    """The factor and unit that put the largest of ``values`` in [1, 1000)."""
    top = max(values, default=0.0)
    return next(((f, u) for u, f in (("s", 1e9), ("ms", 1e6), ("us", 1e3)) if top >= f), (1.0, "ns"))


STEP_UP, STEP_DOWN = "#d62728", "#2ca02c"


def draw_series(ax: Any, series: Series, *, metric: str, factor: float, unit: str, colour: str = "#1f77b4") -> None:
    """One measurement's versions on ``ax``, oldest left, a dashed line where each step began."""
    values = [p.value_ns / factor for p in series.points]
    ax.plot(range(len(values)), values, marker="o", color=colour, label="baseline versions")
    for step in series.steps:
        colour = STEP_UP if step.change > 0 else STEP_DOWN
        ax.axvline(step.index - 0.5, color=colour, linestyle="--" if step.confirmed else ":")
        ax.annotate(
            f"{format_change(step.change)} @ {step.commit[:8]}",
            (step.index - 0.5, 1.0),
            xycoords=("data", "axes fraction"),
            va="top",
            fontsize=8,
            color=colour,
        )
    ax.set_xticks(range(len(values)), [p.commit[:7] for p in series.points], fontsize=7)
    ax.set_ylabel(f"{metric} ({unit})")
    ax.grid(alpha=0.3)


def plot_history(history: History, path: Path | str, *, metric: str = "p50") -> Path:
    """One panel per measurement, value per version, a dashed line where each step began."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    count = max(1, len(history.series))
    fig = Figure(figsize=(9.0, 2.2 * count), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(count, 1, squeeze=False)[:, 0]
    for ax, series in zip(axes, history.series, strict=False):
        factor, unit = time_scale([p.value_ns for p in series.points])
        draw_series(ax, series, metric=metric, factor=factor, unit=unit)
        ax.set_title(f"{series.key} [{series.device_class}]", fontsize=9, loc="left")
    if not history.series:
        axes[0].text(0.5, 0.5, "no baselines", ha="center", va="center")
    return write_atomic(path, lambda f: fig.savefig(f, format="png"))
