"""One self-contained HTML page: the summary table and, per measurement, its distribution.

The figures are PNGs embedded as base64 ``data:`` URIs and the style sheet is
inline, so the file can be uploaded as a CI artifact and opened anywhere, with
no network. matplotlib is driven through its object API (``Figure`` and the Agg
canvas), never ``pyplot``, so rendering inside a pytest session leaves the
user's backend and global figure state alone.
"""

from __future__ import annotations

import base64
import inspect
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from pytest_gpuperf.files import write_atomic
from pytest_gpuperf.model import MeasurementResult, SessionResults, Verdict
from pytest_gpuperf.report.markdown import TOP_OPS
from pytest_gpuperf.report.rows import counts_line, headline, ordered

# html.escape after stripping control characters: every string of the page goes through it
from pytest_gpuperf.report.text import html_text as escape
from pytest_gpuperf.report.units import (
    format_change,
    format_precision,
    format_time,
    format_value,
)

_UNITS = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0))
_BASE_COLOUR, _NOW_COLOUR = "#7f7f7f", "#1f77b4"
_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em; color: #1b1b1b; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; } h3 { font-size: 1em; font-family: monospace; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #d0d0d0; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.regression td { background: #fde2e1; } tr.improvement td { background: #e2f5e3; }
tr.not-comparable td, tr.unstable td { background: #fff4d6; }
.summary { font-size: 1.1em; font-weight: bold; }
figure { margin: 0.5em 0; } img { max-width: 100%; height: auto; }
section.measurement { border-top: 1px solid #e0e0e0; padding-top: 0.5em; }
.note { color: #6b4e00; }
"""


def _css_class(verdict: Verdict) -> str:
    return verdict.value.replace(" ", "-")


def _time_unit(values: Sequence[float]) -> tuple[str, float]:
    typical = sorted(values)[len(values) // 2]
    return next(((name, f) for name, f in _UNITS if typical >= f), ("ns", 1.0))


def distribution_png(result: MeasurementResult, base_label: str = "baseline") -> bytes:
    """Baseline samples against this run's: violins where there is a spread, every sample as a dot."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups: list[tuple[str, str, Sequence[float]]] = []
    if result.baseline is not None and result.baseline.samples_ns:
        groups.append((base_label, _BASE_COLOUR, result.baseline.samples_ns))
    groups.append(("now", _NOW_COLOUR, result.measurement.samples_ns))
    unit, factor = _time_unit([v for _, _, values in groups for v in values])
    fig = Figure(figsize=(7.0, 0.9 + 0.8 * len(groups)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    # matplotlib 3.10 replaced ``vert=False`` by ``orientation=`` (and deprecated the former)
    horizontal: dict[str, Any] = (
        {"orientation": "horizontal"}
        if "orientation" in inspect.signature(ax.violinplot).parameters
        else {"vert": False}
    )
    rng = np.random.default_rng(0)  # fixed jitter: the same results draw the same picture
    for pos, (_, colour, values) in enumerate(groups, start=1):
        scaled = np.asarray(values, dtype=float) / factor
        if len(scaled) > 1 and np.ptp(scaled) > 0:
            parts = ax.violinplot(scaled, positions=[pos], showextrema=False, widths=0.8, **horizontal)
            # a list of PolyCollections at run time; the stubs call it a Collection
            for body in cast("Sequence[Any]", parts["bodies"]):
                body.set_facecolor(colour)
                body.set_alpha(0.3)
        ax.scatter(scaled, pos + rng.uniform(-0.15, 0.15, len(scaled)), s=9, color=colour, alpha=0.8)
        ax.plot([np.median(scaled)] * 2, [pos - 0.35, pos + 0.35], color=colour, linewidth=2)
    ax.set_yticks(range(1, len(groups) + 1), [label for label, _, _ in groups])
    ax.set_ylim(0.4, len(groups) + 0.6)
    ax.set_xlabel(f"time per call ({unit})")
    ax.grid(axis="x", alpha=0.3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{escape(alt)}">'


def _summary_table(session: SessionResults) -> str:
    rows = []
    for r in ordered(session.results):
        h = headline(r)
        m = r.measurement
        cells = [
            f"<td><code>{escape(m.test_id)}</code></td>",
            f"<td>{escape(m.name)}</td>",
            f'<td class="num">{format_time(h.now_ns)}</td>',
            f'<td class="num">{format_time(h.baseline_ns) if h.baseline_ns is not None else "-"}</td>',
            f'<td class="num">{format_change(h.change)}</td>',
            f'<td class="num">{escape(format_precision(m.precision))}</td>',
            f"<td>{escape(h.verdict.value)}</td>",
        ]
        rows.append(f'<tr class="{_css_class(h.verdict)}">{"".join(cells)}</tr>')
    header = "".join(
        f"<th>{c}</th>" for c in ("test", "measurement", "now", "baseline", "change", "precision", "verdict")
    )
    return f'<table id="summary"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _comparisons(result: MeasurementResult) -> str:
    if not result.comparisons:
        return "<p>No baseline: this measurement is new.</p>"
    rows = []
    for c in result.comparisons:
        cells = [
            escape(c.metric),
            escape(format_value(c.baseline, c.unit)),
            escape(format_value(c.current, c.unit)),
            escape(format_change(c.change)),
            escape(c.evidence),
            escape(c.verdict.value),
        ]
        tds = "".join(f'<td class="num">{x}</td>' if i in (1, 2, 3) else f"<td>{x}</td>" for i, x in enumerate(cells))
        rows.append(f'<tr class="{_css_class(c.verdict)}">{tds}</tr>')
        if c.note:
            rows.append(f'<tr><td colspan="6" class="note">{escape(c.note)}</td></tr>')
    header = "".join(f"<th>{c}</th>" for c in ("metric", "baseline", "now", "change", "evidence", "verdict"))
    return f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _profile(result: MeasurementResult) -> str:
    profile = result.measurement.profile
    if profile is None or not profile.top_ops:
        return ""
    rows = "".join(
        f'<tr><td><code>{escape(name)}</code></td><td class="num">{format_time(ns)}</td>'
        f'<td class="num">{share * 100:.1f}%</td></tr>'
        for name, ns, share in profile.top_ops[:TOP_OPS]
    )
    return (
        f"<details><summary>Top operators (<code>{escape(profile.trace_path)}</code>)</summary>"
        f"<table><thead><tr><th>operator</th><th>time</th><th>share</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></details>"
    )


def _measurement_section(result: MeasurementResult, base_label: str) -> str:
    m = result.measurement
    stats = m.stats
    facts = (
        f"{stats.count} samples x {m.calls_per_sample} calls, {escape(m.timer)} on {escape(m.device)}; "
        f"median {format_time(stats.median_ns)}, min {format_time(stats.min_ns)}, "
        f"IQR {format_time(stats.iqr_ns)}, precision {escape(format_precision(m.precision))}"
    )
    unstable = f'<p class="note">unstable: {escape(m.unstable_reason)}</p>' if m.unstable_reason else ""
    figure = _img(distribution_png(result, base_label), f"distribution of {m.key}")
    return (
        f'<section class="measurement {_css_class(result.verdict)}">'
        f"<h3>{escape(m.key)}</h3><p>{facts}</p>{unstable}"
        f"<figure>{figure}</figure>{_comparisons(result)}{_profile(result)}</section>"
    )


def _context(session: SessionResults) -> str:
    env, base = session.environment, session.base_provenance
    items = [
        ("device", f"{env.device_name} ({env.device_type}, class {env.device_class})"),
        ("CPU", env.cpu_model),
        ("Python", env.python),
        ("torch", env.torch),
        ("CUDA", env.cuda),
        ("driver", env.driver),
        ("head commit", session.provenance.commit),
        (f"base ({session.compare_ref})" if session.compare_ref else "base", base.commit if base else None),
        ("started", session.started_at),
        ("mode", session.mode),
    ]
    return "<ul>" + "".join(f"<li><b>{escape(k)}</b>: {escape(str(v))}</li>" for k, v in items if v) + "</ul>"


def render_html(session: SessionResults) -> str:
    """The complete page as text."""
    base_label = f"base ({session.compare_ref})" if session.compare_ref else "baseline"
    sections = "".join(_measurement_section(r, base_label) for r in ordered(session.results))
    body = _summary_table(session) if session.results else "<p>No measurements were taken.</p>"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>pytest-gpuperf report</title><style>{_STYLE}</style></head><body>"
        f'<h1>pytest-gpuperf</h1><p class="summary">{escape(counts_line(session))}</p>'
        f"{_context(session)}<h2>Summary</h2>{body}"
        f"<h2>Distributions</h2>{sections}</body></html>\n"
    )


def write_html(path: Path | str, session: SessionResults) -> Path:
    return write_atomic(path, render_html(session))
