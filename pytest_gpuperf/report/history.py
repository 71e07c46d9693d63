"""The baselines' trends for people: a table per measurement, a PNG, the HTML report's chart.

Renders what the history package decided (``history.baselines_view``: the versions read from
git, the change points ``history.detect`` found in them) and decides nothing itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import HistoryError  # noqa: F401  (importable from here, where it was defined)
from pytest_gpuperf.files import write_atomic
from pytest_gpuperf.report.rows import plural
from pytest_gpuperf.report.units import format_change, format_time

STEP_UP, STEP_DOWN = "#d62728", "#2ca02c"


@dataclass(frozen=True)
class Mark:
    """Where a level change began: the index of its first version at the new level."""

    index: int
    commit: str
    change: float  # relative change of the level
    gradual: bool = False  # a creep over several versions rather than one step


@dataclass(frozen=True)
class Trend:
    """What a trend chart or table shows of one measurement: its versions, oldest first, and its marks."""

    key: str  # the baseline entry's key, test::measurement
    device_class: str
    commits: tuple[str, ...]
    dates: tuple[str, ...]  # ISO 8601 commit dates
    values_ns: tuple[float, ...]
    marks: tuple[Mark, ...] = ()


@dataclass(frozen=True)
class History:
    """The trends of a baselines folder, the commits they span, and what the reader could not say."""

    trends: tuple[Trend, ...]
    commits: int
    skipped: tuple[str, ...] = ()  # file versions that could not be read, with the reason
    note: str = ""  # e.g. the measurements with too few versions for a change to be found


def render_history(history: History, *, metric: str = "p50") -> str:
    """A table per measurement: commit, date, value, change against the previous version, changes."""
    lines = [f"{plural(len(history.trends), 'measurement')} over {plural(history.commits, 'commit')} ({metric})"]
    for trend in history.trends:
        starts = {m.index: m for m in trend.marks}
        lines += ["", f"{trend.key}  [{trend.device_class}]"]
        lines.append(f"  {'commit':<12}  {'date':<25}  {metric:>10}  {'change':>8}  step")
        previous: float | None = None
        for i, (commit, date, value) in enumerate(zip(trend.commits, trend.dates, trend.values_ns, strict=True)):
            change = format_change(value / previous - 1) if previous else "-"
            mark = starts.get(i)
            text = ""
            if mark is not None:
                arrow = "▲" if mark.change > 0 else "▼"
                text = f"{arrow} {'creep' if mark.gradual else 'step'} {format_change(mark.change)} began here"
            lines.append(f"  {commit[:12]:<12}  {date[:25]:<25}  {format_time(value):>10}  {change:>8}  {text}")
            previous = value
    for reason in history.skipped:
        lines.append(f"skipped: {reason}")
    return "\n".join(lines) + "\n" + history.note


def time_scale(values: Sequence[float]) -> tuple[float, str]:
    """The factor and unit that put the largest of ``values`` in [1, 1000)."""
    top = max(values, default=0.0)
    return next(((f, u) for u, f in (("s", 1e9), ("ms", 1e6), ("us", 1e3)) if top >= f), (1.0, "ns"))


def draw_trend(ax: Any, trend: Trend, *, metric: str, factor: float, unit: str, colour: str = "#1f77b4") -> None:
    """One measurement's versions on ``ax``, oldest left, a dashed line where each change began."""
    values = [v / factor for v in trend.values_ns]
    ax.plot(range(len(values)), values, marker="o", color=colour, label="baseline versions")
    for mark in trend.marks:
        colour = STEP_UP if mark.change > 0 else STEP_DOWN
        ax.axvline(mark.index - 0.5, color=colour, linestyle=":" if mark.gradual else "--")
        ax.annotate(
            f"{format_change(mark.change)} @ {mark.commit[:8]}",
            (mark.index - 0.5, 1.0),
            xycoords=("data", "axes fraction"),
            va="top",
            fontsize=8,
            color=colour,
        )
    ax.set_xticks(range(len(values)), [c[:7] for c in trend.commits], fontsize=7)
    ax.set_ylabel(f"{metric} ({unit})")
    ax.grid(alpha=0.3)


def plot_history(history: History, path: Path | str, *, metric: str = "p50") -> Path:
    """One panel per measurement, value per version, a dashed line where each change began."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    count = max(1, len(history.trends))
    fig = Figure(figsize=(9.0, 2.2 * count), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(count, 1, squeeze=False)[:, 0]
    for ax, trend in zip(axes, history.trends, strict=False):
        factor, unit = time_scale(trend.values_ns)
        draw_trend(ax, trend, metric=metric, factor=factor, unit=unit)
        ax.set_title(f"{trend.key} [{trend.device_class}]", fontsize=9, loc="left")
    if not history.trends:
        axes[0].text(0.5, 0.5, "no baselines", ha="center", va="center")
    return write_atomic(path, lambda f: fig.savefig(f, format="png"))
