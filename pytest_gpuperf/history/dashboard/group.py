"""A series page: one test's measurement on one branch, a chart per statistic, its change points and updates."""

from __future__ import annotations

from pytest_gpuperf.history.dashboard.axes import CommitAxis
from pytest_gpuperf.history.dashboard.frame import code, document, swatch
from pytest_gpuperf.history.dashboard.layout import Group, Site, StatisticChart
from pytest_gpuperf.history.dashboard.svg import KIND_COLOUR, NARROW, WIDE, Line, chart, day, short
from pytest_gpuperf.history.model import ChangePoint, Series
from pytest_gpuperf.report.text import html_text as escape
from pytest_gpuperf.report.units import format_change, format_value


def render_group(group: Group, site: Site, title: str) -> str:
    key = group.key
    axis = CommitAxis.of(group.all_series())
    classes = sorted({s.key.device_class for s in group.all_series()})
    heading = f"{code(key.test)} <span class='measurement'>{escape(key.measurement)}</span>"
    facts = (
        f"branch {code(key.branch)}; {len(axis)} commits; "
        f"device class{'' if len(classes) == 1 else 'es'}: {', '.join(escape(c) for c in classes)}"
    )
    charts = "".join(_chart_block(c, group, site, axis) for c in group.charts)
    body = (
        f'<nav><a href="../index.html">{escape(title)}</a></nav><h1>{heading}</h1><p>{facts}</p>'
        f"{_legend(classes, site)}{_switcher(group)}<div class='charts' id='charts'>{charts}</div>"
        f"<h2>Change points</h2>{_changes_table(group, site)}"
        f"<h2>Baseline updates</h2>{_updates_table(group)}"
    )
    return document(f"{key.test}::{key.measurement} [{key.branch}] - {title}", body, root="../", script=True)


def _switcher(group: Group) -> str:
    """Links to each statistic's chart; ``dashboard.js`` turns them into a choice that shows one chart at a time."""
    links = " ".join(f'<a href="#{escape(c.anchor)}">{escape(c.statistic)}</a>' for c in group.charts)
    options = "".join(f'<option value="{escape(c.anchor)}">{escape(c.statistic)}</option>' for c in group.charts)
    return (
        f'<nav class="statistics" id="statistics"><label>statistic <select name="statistic" hidden>{options}'
        f"</select></label> {links}</nav>"
    )


def _line(series: Series, group: Group, site: Site) -> Line:
    changes = group.changes.get(series.key, [])
    diff_links = {
        i: page.href_from_page for i, p in enumerate(series.points) if (page := site.diff_of(p, series)) is not None
    }
    links = [page.href_from_page if (page := site.change_diff(c, series)) else None for c in changes]
    return Line(series, site.colours[series.key.device_class], changes, links, diff_links)


def _chart_block(stat: StatisticChart, group: Group, site: Site, axis: CommitAxis) -> str:
    lines = [_line(s, group, site) for s in stat.series]
    unit = stat.series[0].unit
    better = stat.series[0].better
    wide = stat.statistic.startswith("time.")
    title = f"{stat.statistic} by commit, one line per device class"
    svg = chart(lines, axis, title=title, size=WIDE if wide else NARROW)
    primary = " primary" if wide else ""
    return (
        f'<section class="chart-block{primary}" id="{escape(stat.anchor)}">'
        f"<h2>{escape(stat.statistic)} <small>({escape(unit)}, {escape(better)} is better)</small></h2>"
        f"{svg}</section>"
    )


def _legend(classes: list[str], site: Site) -> str:
    items = [f"<li>{swatch(site.colours[c])} {escape(c)}: median, p10-p90 band</li>" for c in classes]
    items += [
        f"<li>{swatch(colour)} {kind.value}: from the last good run to the first bad one</li>"
        for kind, colour in KIND_COLOUR.items()
    ]
    update = swatch("", '<path class="update-mark" d="M5,0 l5,5 l-5,5 l-5,-5 z"/>')
    diff = swatch("", '<circle class="diff" cx="5" cy="5" r="4"/>')
    busy = swatch("", '<circle class="busy" cx="5" cy="5" r="4"/>')
    items += [f"<li>{update} baseline update</li>", f"<li>{diff} a run with a profile diff (click it)</li>",
              f"<li>{busy} a run measured on a busy runner: off the line, left out of change points "
              "(timings only: peak memory is exact)</li>"]  # fmt: skip
    return f'<ul class="legend">{"".join(items)}</ul>'


def _changes_table(group: Group, site: Site) -> str:
    """One row per event: the leading statistic's change, the statistics that saw it too."""
    by_key = {s.key: s for s in group.all_series()}
    rows = [_change_row(event, by_key[event.key], site) for event in reversed(group.events)]
    if not rows:
        return "<p>No change points in these series.</p>"
    heads = ("statistic", "device class", "kind", "last good", "first bad", "first bad on", "change", "95% CI", "p",
             "runs since", "before", "after", "also seen in", "profile diff")  # fmt: skip
    header = "".join(f"<th>{h}</th>" for h in heads)
    return f'<table class="changes"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _change_row(change: ChangePoint, series: Series, site: Site) -> str:
    page = site.change_diff(change, series)
    diff = f'<a href="{escape(page.href_from_page)}">profile diff</a>' if page else "-"
    also = ", ".join(f"{s.key.statistic} {format_change(s.change)}" for s in change.supporting) or "-"
    cells = [
        escape(series.key.statistic),
        escape(series.key.device_class),
        f'<span class="kind {change.kind.value}">{escape(change.kind_label)}</span>',
        f'<code title="{escape(change.last_good)}">{escape(short(change.last_good))}</code>',
        f'<code title="{escape(change.first_bad)}">{escape(short(change.first_bad))}</code>',
        escape(day(series.points[change.index])),
        escape(format_change(change.change)),
        escape(f"{format_change(change.ci_low)} to {format_change(change.ci_high)}"),
        escape(change.p_text),
        str(change.runs_after),
        escape(format_value(change.before, series.unit)),
        escape(format_value(change.after, series.unit)),
        escape(also),
        diff,
    ]
    tds = "".join(f"<td>{c}</td>" for c in cells)
    return f'<tr class="{change.kind.value}">{tds}</tr>'


def _updates_table(group: Group) -> str:
    seen: dict[tuple[str, str, str], Series] = {}
    for s in group.all_series():
        for p in s.points:
            if p.baseline_update:
                seen.setdefault((p.commit, p.runner, s.key.device_class), s)
    if not seen:
        return "<p>No run in these series updated the baselines.</p>"
    rows = []
    for (commit, runner, device_class), s in seen.items():
        point = next(p for p in s.points if p.commit == commit and p.runner == runner and p.baseline_update)
        rows.append(
            f'<tr><td><code title="{escape(commit)}">{escape(short(commit))}</code></td>'
            f"<td>{escape(day(point))}</td><td>{escape(runner)}</td>"
            f"<td>{escape(device_class)}</td></tr>"
        )
    header = "<tr><th>commit</th><th>date</th><th>runner</th><th>device class</th></tr>"
    return f'<table class="updates"><thead>{header}</thead><tbody>{"".join(rows)}</tbody></table>'
