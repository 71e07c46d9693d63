"""The pull-request comment: a summary line, a table, details, and a hidden marker.

The marker lets a workflow edit its earlier comment instead of adding one per push. A bot posts
it, so every string from the tests or the pull request goes through ``report.text`` first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from pytest_gpuperf.model import (
    Comparison,
    Environment,
    MeasurementResult,
    ProfileDiff,
    Provenance,
    SessionResults,
    Verdict,
)
from pytest_gpuperf.report.notes import note_groups
from pytest_gpuperf.report.resolution import detectable_cell, resolution_lines
from pytest_gpuperf.report.rows import (
    contention_line,
    counts_line,
    energy_comparison,
    energy_source,
    ordered,
    plural,
    reference_column,
    split_key,
    time_comparison,
    unjudged_line,
    verdict_counts,
    verdict_label,
)
from pytest_gpuperf.report.text import html_text, md_cell, md_code, md_row, md_text
from pytest_gpuperf.report.units import format_change, format_precision, format_time, format_value
from pytest_gpuperf.report.why import (
    PERFETTO,
    WHY_COLUMNS,
    explained_heading,
    finding_text,
    head_cells,
    heading,
    headline,
    row_name,
    sentence,
    short_name,
    split_text,
    table_rows,
    why_cells,
)

MARKER = "<!-- pytest-gpuperf-comment -->"
TOP_OPS = 5
WHY_ROWS = 10  # rows of a differential profile in the comment; the HTML report and the JSON have them all
# The differential profiles' share of GitHub's 65,536-character comment (UTF-16 code units): the
# summary table, environment and commits keep the rest, however many tests regressed.
WHY_BUDGET = 24_000
VERDICT_ICON = {  # the comments' mark of each verdict (this one and report.matrix)
    Verdict.REGRESSION: "🔴",
    Verdict.IMPROVEMENT: "🟢",
    Verdict.UNCHANGED: "⚪",
    Verdict.NEW: "🆕",
    Verdict.NOT_COMPARABLE: "🟡",
    Verdict.UNSTABLE: "🟠",
    Verdict.NOT_GATED: "⚫",
    Verdict.NOT_RESOLVED: "🟤",
}


def _short_test(test_id: str) -> str:
    """``tests/perf/test_mm.py::test_x`` -> ``test_mm.py::test_x`` (the folder adds little)."""
    path, name = split_key(test_id)
    return f"{path.rsplit('/', 1)[-1]}::{name}" if path else name


def _test(test_id: str) -> str:
    return md_code(_short_test(test_id))


def _verdict(v: Verdict, label: str | None = None) -> str:
    return f"{VERDICT_ICON[v]} {md_text(label or v.value)}"  # a label may name a metric: the test's text


def _short(commit: str | None) -> str:
    return md_code(commit[:12]) if commit else "-"


def _rows(result: MeasurementResult) -> Iterable[str]:
    m = result.measurement
    test = [_test(m.test_id), md_text(m.name)]
    if not result.comparisons:  # nothing to compare with: still show its time
        yield md_row([*test, "time.p50", "-", format_time(m.stats.median_ns), "-", "", _verdict(result.verdict)])
    energy = energy_comparison(result)
    for c in _shown(result):
        base, head = (md_text(format_value(v, c.unit)) for v in (c.baseline, c.current))
        change = format_change(c.change)
        evidence = energy_source(result) if c is energy else c.evidence  # where the energy came from
        yield md_row([*test, md_text(c.metric), base, head, change, md_text(evidence),
                      _verdict(c.verdict, verdict_label(c, result))])  # fmt: skip


def _table(session: SessionResults) -> list[str]:
    header = ["test", "measurement", "metric", "base", "head", "change", "evidence", "verdict"]
    rows = [row for result in ordered(session.results) for row in _rows(result)]
    left = sum(len(r.comparisons) - len(_shown(r)) for r in session.results)
    more = ["", f"{plural(left, 'unchanged memory or metric comparison')}: in the HTML report and the results JSON."]
    return [md_row(header), "|---|---|---|---:|---:|---:|---|---|", *rows, *(more if left else [])]


def _shown(result: MeasurementResult) -> list[Comparison]:
    """A measurement's rows: its time and energy, and its other comparisons that are not unchanged."""
    shown = (time_comparison(result), energy_comparison(result))  # the energy per call, where measured, as the time
    return [c for c in result.comparisons if c.verdict is not Verdict.UNCHANGED or any(c is s for s in shown)]


def _notes(session: SessionResults) -> list[str]:
    """A bullet a kind of note (``notes.note_groups``): how many measurements, the first, the first one's note."""
    groups = note_groups(session, math.inf)  # the comparisons' own thresholds: the session's is not in the results
    lines = []
    for group in groups:
        who = md_code(group.keys[0]) + (f" and {len(group.keys) - 1} more" if len(group.keys) > 1 else "")
        label = f"**{md_text(group.label)}**: " if group.label and len(group.keys) > 1 else ""
        lines.append(f"- {label}{who}: {md_text(group.text)}")
    if any(len(group.keys) > 1 for group in groups):
        lines.append("- every measurement's notes: the HTML report and the results JSON")
    return lines


def software(env: Environment) -> list[tuple[str, str]]:
    """What the numbers were measured with beside the device: CPU, Python, torch, CUDA, driver, ... (known ones)."""
    facts = [("CPU", env.cpu_model), ("Python", env.python), ("torch", env.torch), ("CUDA", env.cuda)]
    facts += [("driver", env.driver), ("platform", env.platform), *sorted(env.extra.items())]
    return [(name, value) for name, value in facts if value]


def _environment(env: Environment) -> list[str]:
    device = f"{md_text(env.device_name)} ({md_text(env.device_type)}, class {md_code(env.device_class)})"
    return [f"- **device**: {device}", *(f"- **{md_text(name)}**: {md_text(value)}" for name, value in software(env))]


def _provenance(label: str, prov: Provenance | None) -> str | None:
    if prov is None or not prov.commit:
        return None
    extra = [md_text(p) for p in (prov.branch, prov.commit_date, "dirty" if prov.dirty else None) if p]
    return f"- **{label}**: {_short(prov.commit)}" + (f" ({', '.join(extra)})" if extra else "")


def _commits(session: SessionResults) -> list[str]:
    base = f"base ({md_text(session.compare_ref)})" if session.compare_ref else "base"
    provenances = (_provenance("head", session.provenance), _provenance(base, session.base_provenance))
    lines = [line for line in provenances if line]
    baseline_commits = sorted({c.baseline_commit for r in session.results for c in r.comparisons if c.baseline_commit})
    if baseline_commits and not session.compare_ref:  # compare-ref's reference is the base line above
        lines.append("- **baselines recorded at**: " + ", ".join(_short(c) for c in baseline_commits))
    return lines or ["- no git information"]


def _noise(session: SessionResults) -> list[str]:
    lines = [
        f"| test | measurement | samples | precision | {reference_column(session)} noise | detectable change "
        "| timer | notes |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for r in ordered(session.results):
        m = r.measurement
        noise = r.baseline.noise if r.baseline is not None else None
        notes = "; ".join([*([m.unstable_reason] if m.unstable_reason else []), *(n.text for n in m.notes)])
        cells = [
            _test(m.test_id),
            md_text(m.name),
            f"{m.stats.count} x {m.calls_per_sample}",
            format_precision(m.precision),
            format_precision(noise).lstrip("±"),
            md_text(detectable_cell(r)),
            md_text(m.timer),
            md_text(notes),
        ]
        lines.append(md_row(cells))
    return lines


def trace_label(trace: str, folder: Path | None) -> str:
    """A trace's path relative to ``folder`` (the report's) when inside, else its file name: never a runner's path."""
    path = Path(trace)
    if not path.is_absolute():
        return path.as_posix()
    if folder is not None and path.is_relative_to(folder):
        return path.relative_to(folder).as_posix()
    return path.name


def _profiles(session: SessionResults, folder: Path | None) -> list[str]:
    lines: list[str] = []
    for r in ordered(session.results):
        profile = r.measurement.profile
        if profile is None or not profile.top_ops:
            continue
        if lines:
            lines.append("")
        trace = f" ({md_code(trace_label(profile.trace_path, folder))})" if profile.trace_path else ""
        lines += [f"**{md_code(r.measurement.key)}**{trace}", "", "| operator | time | share |", "|---|---:|---:|"]
        for name, ns, share in profile.top_ops[:TOP_OPS]:
            lines.append(f"| {md_cell(md_code(name))} | {format_time(ns)} | {share * 100:.1f}% |")
    return lines


def _details(summary: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def _why_summary(result: MeasurementResult, diff: ProfileDiff) -> str:
    """The collapsed line, raw HTML (GitHub reads no Markdown in it): the test and the diff's headline."""
    test = html_text(_short_test(result.measurement.test_id))
    words = headline(diff, lambda op: f"<code>{html_text(op)}</code>")
    return f"Why <code>{test}</code> got slower" + (f": {words}" if words else "")


def _why_table(diff: ProfileDiff) -> list[str]:
    if diff.base is None:
        lines = ["| op | kind | time per call | calls |", "|---|---|---:|---:|"]
        lines += [md_row([md_code(short_name(c.name)), c.kind, *head_cells(c)])
                  for c in diff.changes[:WHY_ROWS]]  # fmt: skip
        rest = len(diff.changes) - WHY_ROWS
    else:
        lines = [md_row(list(WHY_COLUMNS)), "|---|---|---:|---|---:|---:|---:|---|"]
        shown = table_rows(diff, WHY_ROWS)
        lines += [md_row([md_code(row_name(r)), r.kind, *why_cells(r)]) for r in shown]
        rest = len(diff.rows) - len(shown)
    return lines + (["", f"{rest} more rows in the HTML report and the results JSON."] if rest > 0 else [])


def _why(result: MeasurementResult, diff: ProfileDiff, folder: Path | None) -> list[str]:
    """One collapsed section: the heading, the finding, the host/device split, the table, the note and the traces."""
    return _details(_why_summary(result, diff), why_body(diff, folder))


def why_body(diff: ProfileDiff, folder: Path | None) -> list[str]:
    """A differential profile as Markdown lines: heading, finding, split, table, note, traces."""
    facts = (
        heading(diff),
        explained_heading(diff) if diff.base is not None else None,
        finding_text(diff),
        split_text(diff),
    )
    body = [" ".join(md_text(sentence(text)) for text in facts if text), ""]
    if diff.finding != "disagrees" and (diff.rows or diff.changes):
        body += _why_table(diff)
    if diff.note:
        body += ["", md_text(diff.note)]
    sides = (("head", diff.head_trace), ("base", diff.base_trace))
    traces = [f"{side} {md_code(trace_label(path, folder))}" for side, path in sides if path]
    if traces:
        viewer = f"[Perfetto]({PERFETTO})" if diff.head.profiler == "torch" else md_code("python -m pstats")
        body += ["", f"Traces (open in {viewer}): {', '.join(traces)}"]
    return body


def why_sections(session: SessionResults, budget: int = WHY_BUDGET, folder: Path | None = None) -> list[str]:
    """A collapsed section per regression with a differential profile, worst first, within ``budget``;
    trace paths relative to ``folder`` (``trace_label``)."""
    diffs = [(r, r.profile_diff) for r in ordered(session.results) if r.profile_diff is not None]
    lines: list[str] = []
    used = 0
    for shown, (result, diff) in enumerate(diffs):
        section = _why(result, diff, folder)
        size = sum(len(line.encode("utf-16-le")) // 2 + 1 for line in section)  # GitHub counts UTF-16 units
        if used + size > budget:
            left = len(diffs) - shown
            lines += [f"Differential profiles of {plural(left, 'more regressed test')}: "
                      "in the HTML report and the results JSON.", ""]  # fmt: skip
            break
        lines += section
        used += size
    return lines


def render_comment(session: SessionResults, folder: Path | None = None) -> str:
    """The Markdown PR comment for ``session``; trace paths are shown relative to ``folder``, where it is written."""
    counts = verdict_counts(session)
    icon = "🔴" if counts[Verdict.REGRESSION] else "🟢"
    against = f" against {md_code(session.compare_ref)}" if session.compare_ref else ""
    unjudged = unjudged_line(session)
    lines = [
        MARKER,
        "## pytest-gpuperf",
        "",
        *([f"⚠️ **{md_text(unjudged)}**", ""] if unjudged else []),
        f"{icon} **{counts_line(session)}**{against} "
        f"({plural(len(session.results), 'measurement')} on {md_text(session.environment.device_name)})",
        "",
        *([f"⏳ {md_text(waited)}", ""] if (waited := contention_line(session)) else []),
    ]
    lines += _table(session) if session.results else ["No measurements were taken."]
    if notes := _notes(session):
        lines += ["", *notes]
    resolution = resolution_lines(session)
    if resolution:
        lines += ["", f"🔍 {md_text(' '.join(resolution))}"]
    lines.append("")
    lines += why_sections(session, folder=folder)
    lines += _details("Environment", _environment(session.environment))
    lines += _details("Commits", _commits(session))
    if session.results:
        lines += _details("Noise and precision", _noise(session))
    profiles = _profiles(session, folder)
    if profiles:
        lines += _details("Top operators", profiles)
    return "\n".join(lines) + "\n"
