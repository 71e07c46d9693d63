"""One self-contained HTML page: the summary table and, per measurement, its distribution and trend.

Figures are base64 ``data:`` PNGs and the style sheet is inline, so a CI artifact opens anywhere
without a network. matplotlib is driven through ``Figure`` and the Agg canvas, never ``pyplot``,
so rendering inside a pytest session leaves the user's backend and figure state alone.
"""

from __future__ import annotations

import base64
import inspect
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pytest_gpuperf.model import Comparison, Measurement, MeasurementResult, ProfileDiff, SessionResults, Verdict
from pytest_gpuperf.profiling.explain import leading
from pytest_gpuperf.report.drift import drift_sentences, session_drift
from pytest_gpuperf.report.history import STEP_DOWN, STEP_UP, History, Trend, draw_trend, time_scale
from pytest_gpuperf.report.markdown import TOP_OPS, software
from pytest_gpuperf.report.repro import Rerun, rerun_of
from pytest_gpuperf.report.resolution import detectable_cell, resolution_lines
from pytest_gpuperf.report.rows import (
    contention_line,
    counts_line,
    headline,
    ordered,
    plural,
    reference_column,
    time_comparison,
    unjudged_line,
    verdict_label,
)

# html.escape after stripping control characters: every string of the page goes through it
from pytest_gpuperf.report.text import html_text as escape
from pytest_gpuperf.report.units import format_change, format_precision, format_time, format_value
from pytest_gpuperf.report.why import (
    WHY_COLUMNS,
    explained_heading,
    finding_text,
    head_cells,
    heading,
    row_name,
    sentence,
    short_name,
    split_text,
    time_basis,
    traces_text,
    why_cells,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_BASE_COLOUR, _NOW_COLOUR, _BAND_COLOUR = "#7f7f7f", "#1f77b4", "#f2b134"
_FENCE_IQR = 3.0  # Tukey's "far out": past this many IQRs beyond a quartile a sample is an outlier
_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em; color: #1b1b1b; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; } h3 { font-size: 1em; font-family: monospace; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #d0d0d0; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.regression td { background: #fde2e1; } tr.improvement td { background: #e2f5e3; }
tr.not-comparable td, tr.unstable td { background: #fff4d6; }
.summary { font-size: 1.1em; font-weight: bold; }
figure { margin: 0.5em 0; } img { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; }
section.measurement { border-top: 1px solid #e0e0e0; padding-top: 0.5em; }
.note { color: #6b4e00; } p.repro code { user-select: all; }
.unjudged { background: #fff4d6; border-left: 4px solid #d9a400; padding: 0.5em 0.8em; font-weight: bold; }
code, h3 { overflow-wrap: anywhere; }
section.why { margin: 0.5em 0 1em; } section.why h4 { margin: 0.5em 0 0.25em; }
"""
WHY_BARS = 12  # ops in the bar chart; the table under it lists every row
_WHY_LABEL = 60  # characters of an op's name beside its bar


def _css_class(verdict: Verdict) -> str:
    return verdict.value.replace(" ", "-")


def _figure(width: float, height: float) -> tuple[Figure, Any]:
    """A figure on its own Agg canvas (pyplot's state untouched) and its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def central_range(values: Sequence[float]) -> tuple[float, float]:
    """Where the bulk of ``values`` lies: the central 98%, narrowed to Tukey's far-out fences.

    With a few dozen samples the 1st and 99th percentiles still reach a lone outlier, and an axis
    stretched to it hides a shift; the fences leave such a sample out whatever the count.
    """
    import numpy as np

    low, q1, q3, high = (float(q) for q in np.percentile(values, [1, 25, 75, 99]))  # linear, as every statistic
    fence = _FENCE_IQR * (q3 - q1)
    return max(low, q1 - fence), min(high, q3 + fence)


def zoom_limits(sides: Sequence[Sequence[float]], marks: Sequence[float]) -> tuple[float, float]:
    """Axis limits holding every side's central range and every mark (statistics, threshold band)."""
    lows, highs = zip(*(central_range(values) for values in sides if values), strict=True)
    lo, hi = min(*lows, *marks), max(*highs, *marks)
    pad = (hi - lo) * 0.06 or abs(hi) * 0.01 or 1.0
    return lo - pad, hi + pad


@dataclass(frozen=True)
class _Side:
    label: str
    colour: str
    samples: Sequence[float]  # ns
    statistic: float | None  # ns: the comparison's value for this side


def _band(timing: Comparison | None, centre: float | None) -> tuple[float, float] | None:
    """The threshold band around the drawn baseline's statistic ``centre``: outside it a change is large enough."""
    if timing is None or centre is None or timing.threshold is None:
        return None
    return centre * (1 - timing.threshold), centre * (1 + timing.threshold)


def distribution_figure(result: MeasurementResult, base_label: str = "baseline") -> Figure:
    """Baseline and now on one time axis zoomed to their bulk, the threshold band drawn around the baseline.

    Violins where there is a spread, every sample as a dot, each side's statistic as a bar.
    Samples beyond the zoom sit at the axis edge as triangles, with their count and extreme.
    """
    import numpy as np

    h = headline(result)
    # each bar is the statistic of the samples drawn beside it, so a side's dots and bar have one source
    sides = [_Side("now", _NOW_COLOUR, result.measurement.samples_ns, result.measurement.stats.get(h.statistic))]
    base = result.baseline
    if base is not None and base.samples_ns:
        sides.insert(0, _Side(base_label, _BASE_COLOUR, base.samples_ns, base.stats.get(h.statistic)))
    timing = time_comparison(result)
    band = _band(timing, sides[0].statistic if len(sides) > 1 else None)
    samples = sorted(v for side in sides for v in side.samples)
    factor, unit = time_scale([samples[len(samples) // 2]])  # the unit of a typical sample
    marks = [side.statistic for side in sides if side.statistic is not None] + list(band or ())
    lo, hi = (v / factor for v in zoom_limits([side.samples for side in sides], marks))
    fig, ax = _figure(7.5, 1.3 + 0.75 * len(sides))
    if band is not None and timing is not None:
        ax.axvspan(band[0] / factor, band[1] / factor, color=_BAND_COLOUR, alpha=0.25, lw=0,
                   label=f"threshold ±{timing.threshold:.1%}")  # fmt: skip
        ax.axvline((band[0] + band[1]) / 2 / factor, color=_BASE_COLOUR, linestyle="--", linewidth=1)
    new_api = "orientation" in inspect.signature(ax.violinplot).parameters  # matplotlib 3.10 deprecated ``vert``
    horizontal: dict[str, Any] = {"orientation": "horizontal"} if new_api else {"vert": False}
    rng = np.random.default_rng(0)  # fixed jitter: the same results draw the same picture
    clipped = 0
    for pos, side in enumerate(sides, start=1):
        scaled = np.asarray(side.samples, dtype=float) / factor
        inside = scaled[(scaled >= lo) & (scaled <= hi)]
        if len(inside) > 1 and np.ptp(inside) > 0:  # the density of what is drawn, not of the outliers
            parts = ax.violinplot(inside, positions=[pos], showextrema=False, widths=0.8, **horizontal)
            for body in cast("Sequence[Any]", parts["bodies"]):  # PolyCollections; the stubs say Collection
                body.set_facecolor(side.colour)
                body.set_alpha(0.3)
        ax.scatter(inside, pos + rng.uniform(-0.15, 0.15, len(inside)), s=9, color=side.colour, alpha=0.8)
        clipped += _beyond(ax, scaled[scaled > hi], pos, hi, side.colour, factor, right=True)
        clipped += _beyond(ax, scaled[scaled < lo], pos, lo, side.colour, factor, right=False)
        if side.statistic is not None:
            ax.plot([side.statistic / factor] * 2, [pos - 0.38, pos + 0.38], color=side.colour, linewidth=2.5,
                    label=f"{side.label} {h.statistic}")  # fmt: skip
    ax.set_xlim(lo, hi)
    ax.set_yticks(range(1, len(sides) + 1), [side.label for side in sides])
    ax.set_ylim(0.4, len(sides) + 0.6)
    ax.set_xlabel(f"time per call ({unit})" + (", zoomed to the bulk of the samples" if clipped else ""))
    ax.grid(axis="x", alpha=0.3)
    fig.legend(loc="outside upper center", ncols=3, fontsize=8, frameon=False)
    return fig


def _beyond(ax: Any, values: Any, pos: int, edge: float, colour: str, factor: float, *, right: bool) -> int:
    """Samples past the zoom: triangles on the edge pointing out, and how many and how far; returns the count."""
    if not len(values):
        return 0
    ax.scatter([edge] * len(values), [pos] * len(values), marker=">" if right else "<", s=40, color=colour,
               clip_on=False, zorder=3)  # fmt: skip
    extreme = (max(values) if right else min(values)) * factor
    text = f"{plural(len(values), 'sample')}\n{'up to' if right else 'down to'} {format_time(extreme)}"
    # outside the axes, beside the triangle: inside, the text would cover samples
    ax.annotate(text, (edge, pos), ha="left" if right else "right", va="center", fontsize=8, color=colour,
                xytext=(10 if right else -10, 0), textcoords="offset points", annotation_clip=False)  # fmt: skip
    return len(values)


def device_figure(m: Measurement) -> Figure | None:
    """The samples in the order they were taken, with the SM clock and the power NVML read beside each (one panel
    each, sharing the axis of samples); None where no clock or power was read."""
    state = m.device_state
    if state is None or state.samples != len(m.samples_ns):
        return None
    panels = [(values, label) for values, label in ((state.sm_clock_mhz, "SM clock (MHz)"),
                                                    (state.power_w, "power (W)")) if values]  # fmt: skip
    if not panels:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 1.2 + 1.3 * (len(panels) + 1)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels) + 1, 1, sharex=True, squeeze=False)[:, 0]
    factor, unit = time_scale([m.stats.median_ns])
    order = range(len(m.samples_ns))
    axes[0].plot(order, [v / factor for v in m.samples_ns], ".", markersize=3, color=_NOW_COLOUR)
    axes[0].set_ylabel(f"time per call ({unit})", fontsize=8)
    axes[0].set_ylim(*(v / factor for v in zoom_limits([m.samples_ns], [m.stats.median_ns])))
    for ax, (values, label) in zip(axes[1:], panels, strict=True):
        ax.step(order, values, where="post", color=_BASE_COLOUR, linewidth=1)
        ax.set_ylabel(label, fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel(f"sample, in the order taken ({state.readings} NVML readings; a sample without its own "
                        "carries the last)")  # fmt: skip
    return fig


def _device(m: Measurement) -> str:
    """The device's state beside the samples, and its medians, where NVML was read."""
    state = m.device_state
    figure = device_figure(m)
    if state is None or figure is None:
        return ""
    summary = state.summary
    read = (("SM clock", summary.sm_clock_mhz, "MHz"), ("memory clock", summary.mem_clock_mhz, "MHz"),
            ("power", summary.power_w, "W"), ("temperature", summary.temperature_c, "°C"))  # fmt: skip
    facts = [f"{name} {value:.0f} {unit}" for name, value, unit in read if value is not None]
    caption = f"NVML beside the samples, medians: {', '.join(facts)}" if facts else "NVML beside the samples"
    return (f'<figure class="device">{_img(figure, f"device state of {m.key}")}'
            f"<figcaption>{escape(caption)}</figcaption></figure>")  # fmt: skip


def trend_figure(trend: Trend, now_ns: float | None, metric: str) -> Figure:
    """The baseline's versions over the commits that changed it, and this run's value after them."""
    values = list(trend.values_ns)
    factor, unit = time_scale([*values, *([now_ns] if now_ns is not None else [])])
    fig, ax = _figure(7.5, 2.4)
    draw_trend(ax, trend, metric=metric, factor=factor, unit=unit, colour=_BASE_COLOUR)
    if now_ns is not None:
        ticks = [c[:7] for c in trend.commits]
        ax.plot([len(values) - 1, len(values)], [values[-1] / factor, now_ns / factor], color=_NOW_COLOUR,
                linestyle=":")  # fmt: skip
        ax.plot([len(values)], [now_ns / factor], marker="*", markersize=12, color=_NOW_COLOUR, linestyle="",
                label="now")  # fmt: skip
        ax.set_xticks(range(len(values) + 1), [*ticks, "now"], fontsize=7)
    ax.set_xlabel(f"commits that changed the baseline ({trend.device_class}), oldest first")
    ax.legend(fontsize=8, loc="best")
    return fig


def _img(fig: Figure, alt: str) -> str:
    """``fig`` as an inline PNG."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{escape(alt)}">'


def _table(headers: Sequence[str], rows: Sequence[str], attributes: str = "") -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f"<table{attributes}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def breakable(test_id: str) -> str:
    """``test_id`` escaped, with line-break opportunities after its folders and before its test and parameters:
    a long id wraps in its cell instead of pushing the verdict past the window's edge."""
    text = escape(test_id)
    for separator, marked in (("/", "/<wbr>"), ("::", "<wbr>::"), ("[", "<wbr>[")):
        text = text.replace(separator, marked)
    return text


def _summary_table(session: SessionResults) -> str:
    rows = []
    for r in ordered(session.results):
        h = headline(r)
        m = r.measurement
        cells = [
            f"<td><code>{breakable(m.test_id)}</code></td>",
            f"<td>{escape(m.name)}</td>",
            f'<td class="num">{format_time(h.now_ns)}</td>',
            f'<td class="num">{format_time(h.baseline_ns) if h.baseline_ns is not None else "-"}</td>',
            f'<td class="num">{format_change(h.change)}</td>',
            f'<td class="num">{escape(format_precision(m.precision))}</td>',
            f'<td class="num">{escape(detectable_cell(r))}</td>',
            f"<td>{escape(h.verdict_label)}</td>",
        ]
        rows.append(f'<tr class="{_css_class(h.verdict)}">{"".join(cells)}</tr>')
    reference = reference_column(session)
    headers = ("test", "measurement", "now", reference, "change", "precision", "detectable change", "verdict")
    table = _table(headers, rows, ' id="summary"')
    resolution = resolution_lines(session)
    return table + (f'<p class="note">{escape(" ".join(resolution))}</p>' if resolution else "")


def _comparisons(result: MeasurementResult, reference: str) -> str:
    if not result.comparisons:
        return f"<p>No {reference}: this measurement is new.</p>"
    rows = []
    for c in result.comparisons:
        cells = [
            escape(c.metric),
            escape(format_value(c.baseline, c.unit)),
            escape(format_value(c.current, c.unit)),
            escape(format_change(c.change)) + _less_wait(c),
            escape(c.evidence),
            escape(verdict_label(c, result)),
        ]
        tds = "".join(f'<td class="num">{x}</td>' if i in (1, 2, 3) else f"<td>{x}</td>" for i, x in enumerate(cells))
        rows.append(f'<tr class="{_css_class(c.verdict)}">{tds}</tr>')
        if c.note:
            rows.append(f'<tr><td colspan="6" class="note">{escape(c.note)}</td></tr>')
    return _table(("metric", reference, "now", "change", "evidence", "verdict"), rows)


def _less_wait(c: Comparison) -> str:
    """The change the verdict read, less the run-queue wait, under the wall clock's (where a side waited)."""
    if c.correction is None:
        return ""
    waited = f"{c.correction.wait_share:.0%} / {c.correction.reference_wait_share:.0%} waited"
    return f'<br><span class="less-wait">{escape(format_change(c.correction.change))} less wait ({waited})</span>'


def _profile(result: MeasurementResult) -> str:
    profile = result.measurement.profile
    if profile is None or not profile.top_ops:
        return ""
    rows = [
        f'<tr><td><code>{escape(name)}</code></td><td class="num">{format_time(ns)}</td>'
        f'<td class="num">{share * 100:.1f}%</td></tr>'
        for name, ns, share in profile.top_ops[:TOP_OPS]
    ]
    summary = f"<summary>Top operators (<code>{escape(profile.trace_path)}</code>)</summary>"
    return f"<details>{summary}{_table(('operator', 'time', 'share'), rows)}</details>"


def why_figure(diff: ProfileDiff) -> Figure:
    """With a base, a waterfall from the base's time (0) to the head's: one bar per cause and the rest, each
    starting where the one before ended, its interval as a whisker; without one, the head's top ops as bars."""
    if diff.base is None:
        rows = diff.changes[:WHY_BARS]
        values = [c.head_ns for c in rows]
        labels = [short_name(c.name, _WHY_LABEL) for c in rows]
        starts = [0.0] * len(rows)
        colours = [_BASE_COLOUR] * len(rows)
        whiskers = None
    else:
        shown = leading(diff.rows, most=WHY_BARS)  # the bars add up to the measured change
        values = [r.delta_ns for r in shown]
        labels = [row_name(r, _WHY_LABEL) for r in shown]
        starts = [sum(values[:i]) for i in range(len(values))]
        colours = [_BASE_COLOUR if r.role == "rest" else STEP_UP if r.delta_ns > 0 else STEP_DOWN for r in shown]
        whiskers = [(r.delta_ns - r.low_ns, r.high_ns - r.delta_ns) if r.low_ns is not None and r.high_ns is not None
                    else (0.0, 0.0) for r in shown]  # fmt: skip
    factor, unit = time_scale([abs(v) for v in [*values, *starts]] or [1.0])
    fig, ax = _figure(9.0, 1.0 + 0.32 * len(values))
    positions = range(len(values))
    ax.barh(positions, [v / factor for v in values], left=[x / factor for x in starts], color=colours)
    if whiskers is not None:
        ends = [(x + v) / factor for x, v in zip(starts, values, strict=True)]
        ax.errorbar(ends, positions, xerr=[[w[0] / factor for w in whiskers], [w[1] / factor for w in whiskers]],
                    fmt="none", ecolor="#444444", capsize=2, linewidth=0.8)  # fmt: skip
        ax.axvline(0, color="#444444", linewidth=0.8)
    ax.set_yticks(positions, labels, fontsize=8, family="monospace")
    ax.invert_yaxis()  # the first row on top
    what = f"change in {time_basis(diff)} from the base's" if diff.base is not None else time_basis(diff)
    ax.set_xlabel(f"{what} ({unit})")
    ax.grid(axis="x", alpha=0.3)
    return fig


def _why_table(diff: ProfileDiff) -> str:
    if diff.base is None:
        rows = []
        for c in diff.changes:
            tds = "".join(f'<td class="num">{escape(x)}</td>' for x in head_cells(c))
            rows.append(f"<tr><td><code>{escape(short_name(c.name))}</code></td><td>{c.kind}</td>{tds}</tr>")
        return _table(("op", "kind", "time", "calls"), rows)
    rows = []
    for r in diff.rows:
        tds = "".join(f'<td class="num">{escape(x)}</td>' for x in why_cells(r))
        rows.append(f'<tr class="{r.role}"><td><code>{escape(row_name(r))}</code></td><td>{r.kind}</td>{tds}</tr>')
    return _table(WHY_COLUMNS, rows)


def why_section(diff: ProfileDiff, key: str) -> str:
    """Why a regression got slower: the finding, the host/device split, a waterfall of the rows, every row, the traces.

    ``key`` names the measurement in the figure's alt text; the history dashboard shows the same section.
    """
    measured = explained_heading(diff) if diff.base is not None else None
    facts = " ".join(sentence(text) for text in (heading(diff), measured, finding_text(diff), split_text(diff)) if text)
    parts = [f"<h4>Why it got slower</h4><p>{escape(facts)}</p>"]
    if diff.finding != "disagrees" and (diff.rows or diff.changes):
        figure = _img(why_figure(diff), f"why {key} got slower")
        parts += [f'<figure class="why">{figure}</figure>', _why_table(diff)]
    parts += [f'<p class="note">{escape(text)}</p>' for text in (diff.note, traces_text(diff)) if text]
    return f'<section class="why">{"".join(parts)}</section>'


def _trend(result: MeasurementResult, trend: Trend | None, metric: str) -> str:
    if trend is None or not trend.values_ns:
        return ""
    m = result.measurement
    figure = _img(trend_figure(trend, m.stats.get(metric), metric), f"baseline trend of {m.key}")
    caption = f"{len(trend.values_ns)} baseline versions, {plural(len(trend.marks), 'lasting step')}"
    return f'<figure class="trend">{figure}<figcaption>{caption}</figcaption></figure>'


def _verdict_figures(result: MeasurementResult, base_label: str) -> str:
    """Where the verdict's now and reference (the summary's) are not the drawn samples' statistics (compare-ref's
    paired rounds, fresh process pairs), a line naming them and their source: each figure has one."""
    timing = time_comparison(result)
    if timing is None:
        return ""
    statistic = headline(result).statistic
    drawn = [(timing.current, result.measurement.stats.get(statistic))]
    if timing.baseline is not None and result.baseline is not None:
        drawn.append((timing.baseline, result.baseline.stats.get(statistic)))
    if all(math.isclose(shown, own, rel_tol=1e-9) for shown, own in drawn):
        return ""
    base = f", {escape(base_label)} {format_time(timing.baseline)}" if timing.baseline is not None else ""
    return (
        f"<p>The verdict's figures, as in the summary: now {format_time(timing.current)}{base} "
        f"({escape(format_change(timing.change))}), from {escape(timing.evidence)}. "
        "The samples below are the first reading's, each side's bar their own statistic.</p>"
    )


def _waited(session: SessionResults) -> str:
    """How much of a busy runner's time was contention, and that the verdicts read the times less it."""
    line = contention_line(session)
    return f'<p class="contention">{escape(line)}</p>' if line else ""


def _repro(result: MeasurementResult, again: Rerun | None) -> str:
    """The command that re-runs a regression (report/repro.py), for a developer to copy."""
    if again is None or result.verdict is not Verdict.REGRESSION:
        return ""
    return f'<p class="repro">Reproduce: <code>{escape(again.command(result.measurement))}</code></p>'


def _measurement_section(
    result: MeasurementResult,
    base_label: str,
    reference: str,
    trend: Trend | None,
    metric: str,
    again: Rerun | None = None,
) -> str:
    m = result.measurement
    stats = m.stats
    facts = (
        f"{stats.count} samples x {m.calls_per_sample} calls, {escape(m.timer)} on {escape(m.device)}; "
        f"median {format_time(stats.median_ns)}, min {format_time(stats.min_ns)}, "
        f"IQR {format_time(stats.iqr_ns)}, precision {escape(format_precision(m.precision))}"
    )
    facts = f"{_verdict_figures(result, base_label)}<p>{facts}</p>{_repro(result, again)}"
    unstable = f'<p class="note">unstable: {escape(m.unstable_reason)}</p>' if m.unstable_reason else ""
    why = why_section(result.profile_diff, m.key) if result.profile_diff is not None else ""
    figure = _img(distribution_figure(result, base_label), f"distribution of {m.key}")
    return (
        f'<section class="measurement {_css_class(result.verdict)}">'
        f"<h3>{escape(m.key)}</h3>{facts}{unstable}"
        f'<figure class="distribution">{figure}</figure>{_device(m)}{_trend(result, trend, metric)}'
        f"{_comparisons(result, reference)}{why}{_profile(result)}</section>"
    )


def _context(session: SessionResults) -> str:
    env, base = session.environment, session.base_provenance
    items = [
        ("device", f"{env.device_name} ({env.device_type}, class {env.device_class})"),
        *software(env),
        ("head commit", session.provenance.commit),
        (f"base ({session.compare_ref})" if session.compare_ref else "base", base.commit if base else None),
        ("started", session.started_at),
        ("mode", session.mode),
    ]
    drift = "".join(f'<p class="note">{escape(s)}</p>' for s in drift_sentences(session_drift(session)))
    return "<ul>" + "".join(f"<li><b>{escape(k)}</b>: {escape(str(v))}</li>" for k, v in items if v) + "</ul>" + drift


def render_html(session: SessionResults, history: History | None = None) -> str:
    """The complete page as text; with ``history`` (history.baselines_view) a trend chart per measurement.

    The history's metric should be the statistic the gate used: this run's value is drawn after it in that one.
    """
    base_label = f"base ({session.compare_ref})" if session.compare_ref else "baseline"
    device_class = session.environment.device_class
    trends = {t.key: t for t in (history.trends if history else ()) if t.device_class == device_class}
    again = rerun_of(session)
    reference = reference_column(session)
    sections = "".join(
        _measurement_section(r, base_label, reference, trends.get(r.measurement.key), headline(r).statistic, again)
        for r in ordered(session.results)
    )
    body = _summary_table(session) if session.results else "<p>No measurements were taken.</p>"
    unjudged = unjudged_line(session)  # first, as the PR comment says it: what could not be judged is not a pass
    banner = f'<p class="unjudged">{escape(unjudged)}</p>' if unjudged else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>pytest-gpuperf report</title><style>{_STYLE}</style></head><body>"
        f'<h1>pytest-gpuperf</h1>{banner}<p class="summary">{escape(counts_line(session))}</p>'
        f"{_waited(session)}"
        f"{_context(session)}<h2>Summary</h2>{body}"
        f"<h2>Measurements</h2>{sections}</body></html>\n"
    )
