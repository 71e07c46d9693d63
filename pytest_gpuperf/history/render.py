"""Change points for people and for scripts: an aligned table, Markdown, JSON.

Each format renders what ``detect.find_changes`` decided and decides nothing itself. Values go
through ``report.units`` so a time reads the same here as in every other report. The JSON is a
list of objects whose fields are documented in docs/change-points.md; ``last_good`` and
``first_bad`` are full commit hashes there (the table and Markdown shorten them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_gpuperf.history.model import ChangePoint
from pytest_gpuperf.report.text import md_code, md_row, md_text, plain
from pytest_gpuperf.report.units import format_change, format_value

FORMATS = ("table", "markdown", "json")
_SHORT = 10  # commit hash characters shown in the table and Markdown
_HEADERS = ("kind", "change", "95% CI", "commits", "before", "after", "p", "runs after", "series", "also seen in")


def _short(commit: str) -> str:
    return commit[:_SHORT]


def _range(c: ChangePoint) -> str:
    arrow = "~>" if c.gradual else ".."
    return f"{_short(c.last_good)}{arrow}{_short(c.first_bad)}"


def _interval(c: ChangePoint) -> str:
    return f"{format_change(c.ci_low)} .. {format_change(c.ci_high)}"


def _pending_note(changes: Sequence[ChangePoint]) -> str:
    """What "pending" means, said once below a table that has such a row."""
    if not any(c.pending for c in changes):
        return ""
    return "pending: a level at the series' newest (or oldest) end holds too few runs; new runs confirm or clear it\n"


def _also(c: ChangePoint) -> str:
    """The supporting statistics of an event, each with its own change: ``time.p90 +11.8%, time.mean +10.2%``."""
    return ", ".join(f"{s.key.statistic} {format_change(s.change)}" for s in c.supporting) or "-"


def _cells(c: ChangePoint) -> list[str]:
    return [
        c.kind_label,
        format_change(c.change),
        _interval(c),
        _range(c),
        format_value(c.before, c.unit),
        format_value(c.after, c.unit),
        c.p_text,
        str(c.runs_after),
        c.key.label,
        _also(c),
    ]


@dataclass(frozen=True)
class TooShort:
    """The measurements whose series are too short for the detector to say anything (``detect.too_short``)."""

    measurements: tuple[str, ...]  # "test::measurement [device class, branch]"
    fewest: int  # the runs a series needs
    total: int  # measurements looked at, short or not

    def line(self) -> str:
        """What the user reads: nothing found is not "no change" when a series is too short to tell."""
        if not self.measurements:
            return ""
        if len(self.measurements) == self.total:
            return f"too short to say anything: every series has fewer than {self.fewest} runs\n"
        names = ", ".join(self.measurements[:_NAMED]) + (", ..." if len(self.measurements) > _NAMED else "")
        return f"too short to tell (fewer than {self.fewest} runs): {len(self.measurements)} measurement(s): {names}\n"


_NAMED = 5  # short measurements named before "..."
_ENOUGH = TooShort((), 0, 0)


def render_table(changes: Sequence[ChangePoint], short: TooShort = _ENOUGH) -> str:
    """Aligned columns for a terminal, one event a line; numbers right-aligned; then what was too short."""
    if not changes:
        if short.measurements and len(short.measurements) == short.total:
            return short.line()
        return "no change points\n" + short.line()
    rows = [list(_HEADERS)] + [[plain(cell) for cell in _cells(c)] for c in changes]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADERS))]
    numeric = {1, 2, 4, 5, 6, 7}
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    regressions = sum(c.kind.value == "regression" for c in changes)
    lines.append(f"{len(changes)} change point(s), {regressions} regression(s)")
    return "\n".join(lines) + "\n" + _pending_note(changes) + short.line()


def render_markdown(changes: Sequence[ChangePoint], short: TooShort = _ENOUGH) -> str:
    """A GitHub-flavoured Markdown table; test names as code spans, commits shortened; then what was too short."""
    note = f"\n{md_text(short.line().strip())}\n" if short.measurements else ""
    if not changes:
        if short.measurements and len(short.measurements) == short.total:
            return md_text(short.line().strip()) + "\n"
        return "No change points.\n" + note
    lines = [
        md_row(["Series", "Kind", "Change", "95% CI", "Commits", "Before", "After", "p", "Runs after", "Also seen in"]),
        "|---|---|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for c in changes:
        k = c.key
        where = f"({md_text(k.device_class)}, {md_text(k.branch)})"
        series = f"{md_code(k.test)} {md_code(k.measurement)} {md_code(k.statistic)} {where}"
        cells = [series, c.kind_label, format_change(c.change), _interval(c), md_code(_range(c))]
        cells += [md_text(format_value(c.before, c.unit)), md_text(format_value(c.after, c.unit))]  # units: the user's
        lines.append(md_row([*cells, c.p_text, str(c.runs_after), md_text(_also(c))]))
    pending = _pending_note(changes)
    return "\n".join(lines) + "\n" + (f"\n{md_text(pending.strip())}\n" if pending else "") + note


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def change_to_json(c: ChangePoint) -> dict[str, object]:
    """One event as a JSON object (docs/change-points.md lists the fields), its supporting statistics in it."""
    document = _point_json(c)
    document["supporting"] = [
        {name: value for name, value in _point_json(s).items() if name not in _MEASUREMENT_FIELDS} for s in c.supporting
    ]
    return document


_MEASUREMENT_FIELDS = ("test", "measurement", "device_class", "branch", "unit")


def _point_json(c: ChangePoint) -> dict[str, object]:
    k = c.key
    return {
        "test": k.test,
        "measurement": k.measurement,
        "statistic": k.statistic,
        "device_class": k.device_class,
        "branch": k.branch,
        "last_good": c.last_good,
        "first_bad": c.first_bad,
        "change": _finite(c.change),
        "ci_low": _finite(c.ci_low),
        "ci_high": _finite(c.ci_high),
        "kind": c.kind.value,
        "p_value": c.p_value,
        "before": _finite(c.before),
        "after": _finite(c.after),
        "unit": c.unit,
        "runs_after": c.runs_after,
        "gradual": c.gradual,
        "pending": c.pending,
        "index": c.index,
        "details": {name: value for name, value in c.details.items() if isinstance(value, (str, int, float, bool))},
    }


def render_json(changes: Sequence[ChangePoint], short: TooShort = _ENOUGH) -> str:
    """A list of events (the Action reads it): what was too short is said on standard error by the command."""
    return json.dumps([change_to_json(c) for c in changes], indent=2, allow_nan=False) + "\n"


_RENDERERS: dict[str, Callable[[Sequence[ChangePoint], TooShort], str]] = {
    "table": render_table,
    "markdown": render_markdown,
    "json": render_json,
}


def render_changes(changes: Sequence[ChangePoint], fmt: str, short: TooShort = _ENOUGH) -> str:
    """``changes`` in ``fmt`` (one of :data:`FORMATS`), ending with a newline; ``short`` says what was too short."""
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown change-point format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
    return renderer(changes, short)
