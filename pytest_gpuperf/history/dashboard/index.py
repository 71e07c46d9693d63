"""The index page: one row per measurement (device class, branch) with its median's trend and latest change.

Recent regressions first. A measurement's statistics changing together are one event
(``history.events``): the row shows it once, under the statistic that leads it.

The table is complete without a script; ``dashboard.js`` adds the filters (device class,
test, regressions only) over the rows' ``data-`` attributes and keeps them in the URL's
fragment so a filtered view can be linked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_gpuperf.history.dashboard.frame import breakable_code, document, swatch
from pytest_gpuperf.history.dashboard.layout import Group, Site, StatisticChart
from pytest_gpuperf.history.dashboard.svg import KIND_COLOUR, change_range, change_title, day, sparkline
from pytest_gpuperf.history.model import ChangeKind, ChangePoint, Series, SeriesKey
from pytest_gpuperf.report.text import html_text as escape
from pytest_gpuperf.report.units import format_change, format_value


@dataclass(frozen=True)
class Row:
    """One measurement on one device class and branch: its median, its latest change (an event) and the series that
    change is in, which the trend column draws, so its band marks a change of the line it is drawn on."""

    median: Series  # the latest median column's: time.p50 where the measurement has it
    latest: ChangePoint | None
    href: str
    when: str = "-"  # the day of the latest change's first bad run
    changed: Series | None = None  # the series of the latest change (its lead statistic's)

    @property
    def key(self) -> SeriesKey:
        return self.median.key

    @property
    def trend(self) -> Series:
        """What the trend column draws: the series its band's change is in, else the median."""
        return self.changed if self.changed is not None else self.median

    @property
    def urgency(self) -> tuple[int, int, float, str]:
        """Regressions first, the most recent (fewest runs since) first among them; then improvements; then the rest."""
        label = self.key.label
        if self.latest is None:
            return 2, 0, 0.0, label
        rank = 0 if self.latest.kind is ChangeKind.REGRESSION else 1
        return rank, self.latest.runs_after, -abs(self.latest.change), label


def rows(site: Site) -> list[Row]:
    """The index's rows in their order: one per measurement, device class and branch."""
    found = []
    for group in site.groups:
        for device_class in sorted({s.key.device_class for s in group.all_series()}):
            median = next(s for chart in group.charts for s in chart.series if s.key.device_class == device_class)
            by_key = {s.key: s for s in group.all_series()}
            events = [e for e in group.events if e.key.device_class == device_class]
            latest = max(events, key=lambda e: _first_bad_time(e, by_key[e.key]), default=None)
            when = day(by_key[latest.key].points[latest.index]) if latest is not None else "-"
            changed = by_key[latest.key] if latest is not None else None
            found.append(Row(median, latest, _href(group, group.charts[0]), when, changed))
    return sorted(found, key=lambda row: row.urgency)


def _first_bad_time(change: ChangePoint, series: Series) -> tuple[str, int]:
    """When an event's first bad run was: events of one measurement are ordered by it, whatever their statistic."""
    point = series.points[change.index]
    return point.commit_date or point.started_at, change.index


def _href(group: Group, chart: StatisticChart) -> str:
    return f"{group.path}#{chart.anchor}"


def render_index(site: Site, title: str) -> str:
    ordered = rows(site)
    runs = sum(len(row.median.points) for row in ordered)
    regressions = sum(1 for row in ordered if row.latest is not None and row.latest.kind is ChangeKind.REGRESSION)
    summary = (
        f"{len(ordered)} measurements on {len(site.groups)} pages, {runs} runs, "
        f"{len(site.colours)} device class{'' if len(site.colours) == 1 else 'es'}; "
        f"{regressions} measurements whose latest change is a regression"
    )
    body = f"<h1>{escape(title)}</h1><p class='summary'>{escape(summary)}</p>{_filters(site)}{_table(ordered, site)}"
    return document(title, body, root="", script=True)


def _filters(site: Site) -> str:
    options = "".join(f'<option value="{escape(c)}">{escape(c)}</option>' for c in site.colours)
    return (
        '<form id="filters" class="filters" hidden>'
        f'<label>device class <select name="device"><option value="">all</option>{options}</select></label>'
        '<label>test <input name="test" type="search" placeholder="part of a test id" size="40"></label>'
        '<label><input name="regressions" type="checkbox"> regressions only</label>'
        '<output id="shown"></output></form>'
    )


def _table(ordered: Sequence[Row], site: Site) -> str:
    # Seven columns, ids that wrap at their folders and test: 50 measurements fit a 1,400-pixel window.
    heads = ("test / measurement", "device class / branch", "runs", "latest median", "trend", "latest change",
             "first bad on")  # fmt: skip
    body = "".join(_row(row, site) for row in ordered)
    header = "".join(f"<th>{h}</th>" for h in heads)
    return f'<table id="series"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>'


def _row(row: Row, site: Site) -> str:
    s, latest = row.median, row.latest
    key = s.key
    last = s.points[-1] if s.points else None
    kind = latest.kind.value if latest is not None else "none"
    if latest is not None:
        change = (
            f'{swatch(KIND_COLOUR[latest.kind])} <span class="kind {kind}">{kind}</span> '
            f"{escape(latest.key.statistic)}<br>"
            f'<span title="{escape(change_title(latest))}"><span class="nowrap">{escape(change_range(latest))}</span> '
            f"{escape(format_change(latest.change))}</span>"
        )
        when = f'{escape(row.when)}<br><span class="since">{latest.runs_after} runs since</span>'
    else:
        change, when = "-", "-"
    latest_value = f"{escape(key.statistic)} {escape(format_value(last.value, s.unit))}" if last is not None else "-"
    trend = sparkline(row.trend, latest)
    if row.trend is not s:  # the line is not the median's: say whose it is
        trend += f'<br><span class="statistic">{escape(row.trend.key.statistic).replace(".", ".<wbr>")}</span>'
    cells = [
        f'<td><a href="{escape(row.href)}">{breakable_code(key.test)}</a>'
        f'<br><span class="measurement">{escape(key.measurement)}</span></td>',
        f'<td><span class="nowrap">{swatch(site.colours[key.device_class])} {escape(key.device_class)}</span>'
        f'<br><span class="branch">{escape(key.branch)}</span></td>',
        f'<td class="num">{len(s.points)}</td>',
        f'<td class="num">{latest_value}</td>',
        f"<td>{trend}</td>",
        f"<td>{change}</td>",
        f'<td class="nowrap">{when}</td>',
    ]
    data = f'data-device="{escape(key.device_class)}" data-test="{escape(key.test)}" data-kind="{kind}"'
    return f'<tr class="{kind}" {data}>{"".join(cells)}</tr>'
