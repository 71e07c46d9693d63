"""One chart of a series page as inline SVG: per device class a median line in its p10-p90 band, every run a
point with a hover title, change points and baseline updates marked.

Hand-written SVG rather than matplotlib's: the page must load with no library, a point's
hover title (commit, runner, value) and a change point's link to its profile diff must be
real elements, and a series of 1,000 runs must cost kilobytes, not a 1 MB image. Every
user-controlled string goes through ``report.text.html_text``; colours and coordinates are
the module's own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_gpuperf.history.dashboard.axes import CommitAxis, ValueScale
from pytest_gpuperf.history.model import ChangeKind, ChangePoint, Point, Series
from pytest_gpuperf.report.text import html_text as escape
from pytest_gpuperf.report.units import format_change

WIDE, NARROW = (960, 300), (640, 280)  # the time chart; memory and metric charts beside it
SPARK = (120, 24)  # the index's inline chart of a measurement's median
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 44, 42
_X_TICKS = 8
_LABEL_ROWS = 3  # change-point labels stagger over this many rows so neighbours do not overprint
KIND_COLOUR = {ChangeKind.REGRESSION: "#d62728", ChangeKind.IMPROVEMENT: "#2ca02c"}
SHORT = 10  # hex digits of a commit in labels


@dataclass(frozen=True)
class Line:
    """One device class's series on a chart, with its change points and the pages of its profile diffs."""

    series: Series
    colour: str
    changes: Sequence[ChangePoint] = ()
    change_links: Sequence[str | None] = ()  # per change point: its profile diff page, if one was recorded
    diff_links: Mapping[int, str] = field(default_factory=dict)  # point index -> profile diff page (relative href)


def short(commit: str) -> str:
    return commit[:SHORT]


def change_range(change: ChangePoint) -> str:
    """``1a2b3c4d5e..6f7a8b9c0d``: the commits a change point happened between."""
    return f"{short(change.last_good)}..{short(change.first_bad)}"


def change_text(change: ChangePoint) -> str:
    """``1a2b3c4d5e..6f7a8b9c0d +12.3%``: a change point as its marks and tables name it."""
    return f"{change_range(change)} {format_change(change.change)}"


def day(point: Point) -> str:
    """The ISO date of a point's commit (of its run where the store has no commit date)."""
    return (point.commit_date or point.started_at)[:10]  # an ISO time's own date; the axis checked the format


def change_title(change: ChangePoint) -> str:
    """A change point's hover title: kind, commit range in full, change with its interval, significance."""
    interval = f"{format_change(change.ci_low)} to {format_change(change.ci_high)}"
    gradual = ", gradual" if change.gradual else ""
    gradual += ", pending: too few runs at a level yet" if change.pending else ""
    return (
        f"{change.kind.value}{gradual} on {change.key.device_class}: {format_change(change.change)} "
        f"(95% CI {interval}, p {_p_relation(change.p_text)})\n"
        f"last good {change.last_good}\nfirst bad {change.first_bad}\n{change.runs_after} runs since"
    )


def _p_relation(text: str) -> str:
    """``= 0.0012`` or ``< 0.0025``: a p-value after the ``p`` it is of."""
    return text if text.startswith("<") else f"= {text}"


def point_title(point: Point, series: Series, scale: ValueScale) -> str:
    """A point's hover title, raw text: the commit and its date, the runner, the value and its spread."""
    lines = [
        f"commit {short(point.commit)} ({day(point)})",
        f"runner {point.runner}, {series.key.device_class}",
        f"{series.key.statistic} {scale.exact(point.value)}",
    ]
    if point.p10 is not None and point.p90 is not None:
        lines.append(f"p10-p90 {scale.exact(point.p10)} to {scale.exact(point.p90)}")
    if point.ci_low is not None and point.ci_high is not None:
        lines.append(f"95% CI {scale.exact(point.ci_low)} to {scale.exact(point.ci_high)}")
    extras = [
        f"busy runner: {point.busy} (left out of change points)" if point.busy else "",
        f"{point.samples} samples" if point.samples is not None else "",
        f"resolves {point.detectable:.1%} (minimum detectable change)" if point.detectable is not None else "",
        f"verdict: {point.verdict.value}" if point.verdict else "",
        "baseline updated" if point.baseline_update else "",
        "profile diff recorded" if point.has_profile_diff else "",
    ]
    return "\n".join(lines + [e for e in extras if e])


class _Frame:
    """Pixel positions: commit slots across, the value scale up."""

    def __init__(self, axis: CommitAxis, scale: ValueScale, size: tuple[int, int]) -> None:
        self.axis, self.scale = axis, scale
        self.width, self.height = size
        self.plot_w = self.width - _LEFT - _RIGHT
        self.plot_h = self.height - _TOP - _BOTTOM
        self.bottom = self.height - _BOTTOM
        self.slot_w = self.plot_w / max(len(axis), 1)

    def x(self, slot: float) -> float:
        return _LEFT + (slot + 0.5) * self.slot_w

    def y(self, value: float) -> float:
        span = (self.scale.high - self.scale.low) or 1.0
        return _TOP + (1 - (value - self.scale.low) / span) * self.plot_h


def chart(lines: Sequence[Line], axis: CommitAxis, *, title: str, size: tuple[int, int] = WIDE) -> str:
    """The chart of one statistic: ``lines`` share its axes (one per device class)."""
    values = [v for line in lines for p in line.series.points for v in _values(p)]
    unit = lines[0].series.unit if lines else ""
    statistic = lines[0].series.key.statistic if lines else ""
    frame = _Frame(axis, ValueScale.of(values, unit), size)
    slots = [axis.slots(line.series) for line in lines]
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {frame.width} {frame.height}" role="img">',
        f"<title>{escape(title)}</title>",
        _grid(frame, statistic),
        *(_change_areas(line, xs, frame) for line, xs in zip(lines, slots, strict=True)),
        *(_band(line, xs, frame) for line, xs in zip(lines, slots, strict=True)),
        *(_median(line, xs, frame) for line, xs in zip(lines, slots, strict=True)),
        *(_updates(line, xs, frame) for line, xs in zip(lines, slots, strict=True)),
        *(_points(line, xs, frame) for line, xs in zip(lines, slots, strict=True)),
        _change_labels(lines, slots, frame),
        "</svg>",
    ]
    return "".join(parts)


def _values(point: Point) -> tuple[float, ...]:
    return tuple(v for v in (point.value, point.p10, point.p90) if v is not None and math.isfinite(v))


def _grid(frame: _Frame, statistic: str) -> str:
    scale, parts = frame.scale, []
    right = frame.width - _RIGHT
    for tick in scale.ticks:
        y = frame.y(tick)
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(f'<text class="tick" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f"{scale.tick_label(tick)}</text>")  # fmt: skip
    bottom = frame.bottom
    axis = frame.axis
    if len(axis):
        step = max(1, math.ceil(len(axis) / (_X_TICKS * frame.width // WIDE[0])))
        for slot in range(0, len(axis), step):
            x = frame.x(slot)
            parts.append(
                f'<text class="tick" x="{x:.1f}" y="{bottom + 15}" text-anchor="middle">{axis.commits[slot][:7]}'
                f'<tspan x="{x:.1f}" dy="13">{axis.dates[slot].date().isoformat()}</tspan></text>'
            )
    unit = f" ({escape(scale.label_unit)})" if scale.label_unit else ""
    parts.append(f'<text class="axis" x="{_LEFT - 56}" y="{_TOP - 8}">{escape(statistic)}{unit}</text>')
    parts.append(f'<rect class="frame" x="{_LEFT}" y="{_TOP}" width="{frame.plot_w}" height="{frame.plot_h}"/>')
    return "".join(parts)


def _band(line: Line, xs: Sequence[float], frame: _Frame) -> str:
    """The runs' p10-p90 as one polygon per stretch of points that have both."""
    parts, stretch = [], []
    for point, slot in [*zip(line.series.points, xs, strict=True), (None, 0.0)]:
        low, high = (point.p10, point.p90) if point is not None else (None, None)
        if low is not None and high is not None and math.isfinite(low) and math.isfinite(high):
            stretch.append((frame.x(slot), frame.y(low), frame.y(high)))
            continue
        if stretch:
            upper = " ".join(f"{x:.1f},{hi:.1f}" for x, _, hi in stretch)
            lower = " ".join(f"{x:.1f},{lo:.1f}" for x, lo, _ in reversed(stretch))
            parts.append(f'<polygon class="band" fill="{line.colour}" points="{upper} {lower}"/>')
            stretch = []
    return "".join(parts)


def _median(line: Line, xs: Sequence[float], frame: _Frame) -> str:
    coords = [  # through the quiet runs: a busy run is a point of its own, off the line
        f"{frame.x(slot):.1f},{frame.y(p.value):.1f}"
        for p, slot in zip(line.series.points, xs, strict=True)
        if math.isfinite(p.value) and p.busy is None
    ]
    if not coords:
        return ""
    return f'<polyline class="median" stroke="{line.colour}" points="{" ".join(coords)}"/>'


def _points(line: Line, xs: Sequence[float], frame: _Frame) -> str:
    series, scale = line.series, frame.scale
    parts = [f'<g class="points" fill="{line.colour}">']
    for i, (point, slot) in enumerate(zip(series.points, xs, strict=True)):
        if not math.isfinite(point.value):
            continue
        title = escape(point_title(point, series, scale))
        circle = f'<circle cx="{frame.x(slot):.1f}" cy="{frame.y(point.value):.1f}"'
        href = line.diff_links.get(i)
        if point.busy is not None and href is None:
            parts.append(f'{circle} r="3" class="busy"><title>{title}</title></circle>')
        elif href is None:
            parts.append(f'{circle} r="2.2"><title>{title}</title></circle>')
        else:
            parts.append(f'<a href="{escape(href)}">{circle} r="4.5" class="diff"><title>{title}</title></circle></a>')
    parts.append("</g>")
    return "".join(parts)


def _updates(line: Line, xs: Sequence[float], frame: _Frame) -> str:
    """A baseline update: a dotted rule at its run and a diamond on the time axis."""
    parts, bottom = [], frame.bottom
    for point, slot in zip(line.series.points, xs, strict=True):
        if not point.baseline_update:
            continue
        x = frame.x(slot)
        title = escape(f"baseline updated at {short(point.commit)} by {point.runner} ({line.series.key.device_class})")
        parts.append(
            f'<g class="update"><line x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" y2="{bottom}"/>'
            f'<path d="M{x:.1f},{bottom - 6} l5,6 l-5,6 l-5,-6 z"/><title>{title}</title></g>'
        )
    return "".join(parts)


def _change_span(change: ChangePoint, xs: Sequence[float], frame: _Frame) -> tuple[float, float]:
    """From the last good run to the first bad one, in pixels."""
    after = frame.x(xs[change.index])
    before = frame.x(xs[change.index - 1]) if change.index > 0 else float(_LEFT)
    return before, after


def _change_areas(line: Line, xs: Sequence[float], frame: _Frame) -> str:
    parts = []
    for change in line.changes:
        x0, x1 = _change_span(change, xs, frame)
        colour = KIND_COLOUR[change.kind]
        width = max(x1 - x0, 2.0)
        parts.append(
            f'<rect class="change {change.kind.value}" fill="{colour}" x="{x1 - width:.1f}" y="{_TOP}" '
            f'width="{width:.1f}" height="{frame.plot_h}"><title>{escape(change_title(change))}</title></rect>'
        )
    return "".join(parts)


def _change_labels(lines: Sequence[Line], slots: Sequence[Sequence[float]], frame: _Frame) -> str:
    """Each change point's commit range and change above the plot, linked to its profile diff where one exists."""
    marks = sorted(
        (
            (_change_span(change, xs, frame)[1], change, href)
            for line, xs in zip(lines, slots, strict=True)
            for change, href in zip(line.changes, _links(line), strict=True)
        ),
        key=lambda mark: mark[0],
    )
    parts = []
    for row, (x, change, href) in enumerate(marks):
        y = 12 + (row % _LABEL_ROWS) * 11
        label = change_text(change)
        if len(lines) > 1:  # which device class's line changed
            label = f"{change.key.device_class} {label}"
        anchor = "end" if x > frame.width * 0.7 else "start"
        text = (
            f'<text class="change-label {change.kind.value}" x="{x:.1f}" y="{y}" text-anchor="{anchor}" '
            f'fill="{KIND_COLOUR[change.kind]}">{escape(label)}'
            f"<title>{escape(change_title(change))}</title></text>"
        )
        parts.append(f'<a href="{escape(href)}">{text}</a>' if href else text)
    return "".join(parts)


def _links(line: Line) -> Sequence[str | None]:
    return line.change_links or [None] * len(line.changes)


def sparkline(series: Series, change: ChangePoint | None) -> str:
    """A small chart of ``series`` (the index's trend column): its values as a line, ``change`` as a band.

    ``change`` is placed by its first bad commit in ``series`` (an event led by another statistic
    of the measurement still lands on the median's runs).
    """
    width, height = SPARK
    values = [p.value for p in series.points if math.isfinite(p.value)]
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    step = width / max(len(series.points) - 1, 1)

    def y(value: float) -> float:
        return 2 + (1 - (value - low) / span) * (height - 4)

    coords = " ".join(f"{i * step:.1f},{y(p.value):.1f}" for i, p in enumerate(series.points) if math.isfinite(p.value))
    mark = ""
    at = next((i for i, p in enumerate(series.points) if change is not None and p.commit == change.first_bad), None)
    if change is not None and at is not None:
        x0 = max(at - 1, 0) * step
        mark = (
            f'<rect class="change {change.kind.value}" fill="{KIND_COLOUR[change.kind]}" x="{x0:.1f}" y="0" '
            f'width="{max(at * step - x0, 2.0):.1f}" height="{height}"/>'
        )
    label = escape(f"{series.key.statistic}: {len(series.points)} runs")
    return (
        f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img">'
        f'<title>{label}</title>{mark}<polyline class="median" points="{coords}"/></svg>'
    )
