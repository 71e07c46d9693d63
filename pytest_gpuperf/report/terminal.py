"""The terminal summary: a table of every measurement and a line of counts.

``render_summary`` writes to pytest's ``TerminalWriter`` (the plugin) or a :class:`PlainWriter` (the CLI).
Every string from the tests goes through ``text.plain``: no escape sequence of theirs reaches the terminal.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TextIO

from pytest_gpuperf.model import ProfileSummary, SessionResults, Verdict
from pytest_gpuperf.report.drift import drift_sentences, session_drift
from pytest_gpuperf.report.notes import FULL_NOTES, LINE_LIMIT, note_groups, quietly_past, wrapped
from pytest_gpuperf.report.resolution import resolution_lines
from pytest_gpuperf.report.rows import (
    Headline,
    contention_line,
    counts_line,
    energy_comparison,
    energy_source,
    headline,
    named,
    ordered,
    reference_column,
    time_comparison,
    unjudged_line,
    verdict_label,
)
from pytest_gpuperf.report.text import plain
from pytest_gpuperf.report.units import format_change, format_precision, format_time, format_value
from pytest_gpuperf.report.why import PERFETTO, why_lines

if TYPE_CHECKING:
    from pytest_gpuperf.baseline.store import EntryChange

HEADERS = ("test", "measurement", "now", "baseline", "change", "precision", "verdict")
_MARKUP = {
    Verdict.REGRESSION: "red",
    Verdict.IMPROVEMENT: "green",
    Verdict.NOT_COMPARABLE: "yellow",
    Verdict.UNSTABLE: "yellow",
    Verdict.NOT_GATED: "yellow",
    Verdict.NOT_RESOLVED: "yellow",
}
_GAP = "  "
_ROW_COLUMNS = HEADERS[1:]  # a row's cells, after its test id
_NUMBERS = {1, 2, 3, 4}  # of those, the ones that line up on the right
_INDENT = "  "  # a measurement under its test id, when ids get lines of their own
_DETAIL = "    "  # a line about one row: another metric, an unstable reason


class Writer(Protocol):
    def sep(self, sepchar: str, title: str | None = ..., **markup: bool) -> None: ...

    def line(self, s: str = ..., **markup: bool) -> None: ...


def shorten_test_id(test_id: str, width: int) -> str | None:
    """``test_id`` in ``width`` characters, or None: only folders give way, from the middle.

    The file name, test name and parameters tell rows apart (``tests/…/test_mm.py::test_mm[fp16-4096]``),
    so an id that cannot fit without cutting them gets a line of its own.
    """
    if len(test_id) <= width:
        return test_id
    path, sep, name = test_id.partition("::")
    *folders, file = path.split("/")
    if not folders:
        return None
    tail = f"{file}{sep}{name}"
    for keep in range(len(folders) - 1, -1, -1):  # as many leading folders as fit
        short = "/".join([*folders[:keep], "…", tail])
        if len(short) <= width:
            return short
    return None


@dataclass(frozen=True)
class _Row:
    test_id: str
    cells: tuple[str, ...]  # _ROW_COLUMNS
    markup: dict[str, bool]
    details: tuple[tuple[str, dict[str, bool]], ...]


def _markup(verdict: Verdict) -> dict[str, bool]:
    colour = _MARKUP.get(verdict)
    return {colour: True} if colour else {}


def _details(h: Headline) -> tuple[tuple[str, dict[str, bool]], ...]:
    """Lines under a row: its other comparisons that decided or are past their threshold, the energy per call
    where it was measured, and why it got slower.

    An unchanged comparison past its threshold carries the note saying why (a floor, a guard):
    without it "+56% unchanged" reads as the gate ignoring its own threshold.
    """
    timing = time_comparison(h.result)
    energy = energy_comparison(h.result)
    lines = []
    for c in h.result.comparisons:
        quiet = c is not timing and quietly_past(c)
        if c is energy:
            source = energy_source(h.result)
            text = (f"{_DETAIL}energy per call: {format_value(c.current, c.unit)} vs {format_value(c.baseline, c.unit)}"
                    f" ({format_change(c.change)}) {c.verdict.value}" + (f" ({source})" if source else ""))  # fmt: skip
            lines.append((plain(f"{text}: {c.note}" if quiet and c.note else text), _markup(c.verdict)))
            continue
        if not quiet and not any(c is other for other in h.others):
            continue
        text = (
            f"{_DETAIL}{c.metric}: {format_value(c.current, c.unit)} vs "
            f"{format_value(c.baseline, c.unit)} ({format_change(c.change)}) {verdict_label(c, h.result)}"
        )
        lines.append((plain(f"{text}: {c.note}" if quiet and c.note else text), _markup(c.verdict)))
    reason = h.result.measurement.unstable_reason
    if reason:
        lines.append((f"{_DETAIL}unstable: {plain(reason)}", {"yellow": True}))
    diff = h.result.profile_diff
    if diff is not None:  # the failure message's lines: one wording of why, wherever it shows
        lines.extend((f"{_DETAIL}{plain(line)}", {}) for line in why_lines(diff))
    return tuple(lines)


def _row(h: Headline) -> _Row:
    m = h.result.measurement
    cells = (
        plain(m.name),
        format_time(h.now_ns),
        format_time(h.baseline_ns) if h.baseline_ns is not None else "-",
        format_change(h.change),
        format_precision(m.precision),
        plain(h.verdict_label),
    )
    return _Row(plain(m.test_id), cells, _markup(h.verdict), _details(h))


def _join(cells: Sequence[str], widths: Sequence[int]) -> str:
    """The row's cells after its first, which is the test id or the measurement name."""
    offset = len(cells) - len(_ROW_COLUMNS)
    parts = [
        c.rjust(w) if i - offset in _NUMBERS else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    ]
    return _GAP.join(parts).rstrip()


def _layout(headers: Sequence[str], rows: Sequence[_Row], width: int) -> list[tuple[str, dict[str, bool]]]:
    """Each row on one line when every test id fits its column (folders shortened), else ids on lines of their own."""
    widths = [max(len(head), *(len(r.cells[i]) for r in rows)) for i, head in enumerate(headers[1:])]
    rest = sum(widths) + len(_GAP) * len(widths)
    ids = [shorten_test_id(r.test_id, width - rest) for r in rows]
    out: list[tuple[str, dict[str, bool]]] = []
    if all(ids):
        first = max(len(headers[0]), *(len(i or "") for i in ids))
        out.append((_join([headers[0].ljust(first), *headers[1:]], [first, *widths]), {"bold": True}))
        for row, short in zip(rows, ids, strict=True):
            out.append((_join([str(short).ljust(first), *row.cells], [first, *widths]), row.markup))
            out.extend(row.details)
        return out
    both = f"{headers[0]} / {headers[1]}"
    indented = [max(len(both), widths[0] + len(_INDENT)), *widths[1:]]
    out.append((_join([both, *headers[2:]], indented), {"bold": True}))
    first_seen = {test_id: i for i, test_id in reversed(list(enumerate(r.test_id for r in rows)))}
    previous = None
    for row in sorted(rows, key=lambda r: first_seen[r.test_id]):  # a test's rows together, worst test first
        if row.test_id != previous:
            out.append((shorten_test_id(row.test_id, width) or row.test_id, row.markup))
            previous = row.test_id
        out.append((_join([_INDENT + row.cells[0], *row.cells[1:]], indented), row.markup))
        out.extend(row.details)
    return out


def render_summary(session: SessionResults, tw: Writer) -> None:
    """Write the measurement table and the counts line to ``tw``."""
    ref = session.compare_ref
    compared = any(c.baseline is not None for r in session.results for c in r.comparisons)
    title = f"gpuperf: {'compared with' if compared else 'nothing compared with'} {plain(ref)}" if ref else ""
    tw.sep("=", title or f"gpuperf ({session.mode})")
    if not session.results:
        tw.line("no measurements")
        return
    heads = [headline(r) for r in ordered(session.results)]
    stat = {h.statistic for h in heads}
    headers = list(HEADERS)
    headers[2] = f"{stat.pop()} now" if len(stat) == 1 else "now"
    headers[3] = reference_column(session)
    width = int(getattr(tw, "fullwidth", 0) or shutil.get_terminal_size((100, 24)).columns)
    for text, markup in _layout(headers, [_row(h) for h in heads], width):
        tw.line(text, **markup)
    colour = "red" if any(h.verdict is Verdict.REGRESSION for h in heads) else "green"
    tw.line(f"gpuperf: {counts_line(session)}", bold=True, **{colour: True})
    if waited := contention_line(session):
        tw.line(f"gpuperf: {waited}", yellow=True)
    for sentence in drift_sentences(session_drift(session)):  # environment strings from a results file: inert
        tw.line(f"gpuperf: {plain(sentence)}", yellow=True)


class PlainWriter:
    """A minimal TerminalWriter for the CLI: ANSI colours only on a terminal."""

    _CODES: ClassVar[dict[str, str]] = {"red": "31", "green": "32", "yellow": "33", "bold": "1"}

    def __init__(self, stream: TextIO | None = None, *, color: bool | None = None, width: int | None = None):
        self.stream = stream if stream is not None else sys.stdout
        self.color = self.stream.isatty() if color is None else color
        self.fullwidth = width or shutil.get_terminal_size((100, 24)).columns

    def _paint(self, text: str, markup: dict[str, bool]) -> str:
        codes = [self._CODES[k] for k, on in markup.items() if on and k in self._CODES]
        if not self.color or not codes:
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m"

    def sep(self, sepchar: str, title: str | None = None, **markup: bool) -> None:
        if title is None:
            self.line(sepchar * self.fullwidth, **markup)
            return
        side = max(1, (self.fullwidth - len(title) - 2) // (2 * len(sepchar)))
        self.line(f"{sepchar * side} {title} {sepchar * side}", **markup)

    def line(self, s: str = "", **markup: bool) -> None:
        self.stream.write(self._paint(s, markup) + "\n")


def render_notes(tw: Any, session: SessionResults, threshold: float) -> None:
    """What a reader must not miss (``notes.note_groups``): a line a kind, of at most ``notes.LINE_LIMIT`` characters.

    Routine notes (``NoteKind.ROUTINE``) stay in the results files; a kind's line gives its count, the first
    measurement it concerns and the first one's note; every note in full is in --gpuperf-explain and the reports.
    A time past ``threshold`` yet "unchanged" gets its reason too.
    """
    groups = note_groups(session, threshold)
    if not groups:
        return
    tw.write_sep("-", "gpuperf notes")
    for group in groups:
        tw.write_line(plain(group.line(LINE_LIMIT)))
    if any(len(group.keys) > 1 or len(group.line()) > LINE_LIMIT for group in groups):
        tw.write_line(FULL_NOTES)


def change_lines(changes: Sequence[EntryChange], relative: Callable[[Path], str]) -> list[str]:
    """``gpuperf: baseline added: KEY in PATH``; several entries of one kind in one file are one line with
    their count and the first keys; entries kept as they were are one count (``relative``: a path as shown)."""
    grouped: dict[tuple[str, Path], list[str]] = {}
    for change in changes:
        if change.kind != "unchanged":
            grouped.setdefault((change.kind, change.path), []).append(change.key)
    lines = []
    for (kind, path), keys in grouped.items():
        what = keys[0] if len(keys) == 1 else f"{len(keys)} entries ({named(keys)})"
        lines.append(f"gpuperf: baseline {kind}: {what} in {relative(path)}")
    if kept := sum(1 for c in changes if c.kind == "unchanged"):
        lines.append(f"gpuperf: {kept} baseline entr{'y' if kept == 1 else 'ies'} unchanged (kept as is)")
    return lines


def render_resolution(tw: Any, session: SessionResults) -> None:
    """The measurements whose threshold is below what they can resolve, and what would resolve it
    (``resolution.resolution_lines``): one grouped note."""
    for line in resolution_terminal_lines(session):
        tw.write_line(line, yellow=True)


def resolution_terminal_lines(session: SessionResults) -> list[str]:
    """``resolution_lines`` as the terminal writes them: wrapped at ``LINE_LIMIT``, except a command, which
    keeps a line of its own whole so that it can be copied."""
    lines: list[str] = []
    for line in resolution_lines(session):
        text, _, command = plain(line).partition(": pytest ")
        if command:
            lines += wrapped(f"{text}:")
            lines.append(f"{' ' * len('gpuperf: ')}pytest {command}")
        else:
            lines += wrapped(text)
    return lines


def render_unjudged(tw: Any, session: SessionResults) -> None:
    """The run's last line when it could not judge what it was asked to (``rows.unjudged_line``)."""
    line = unjudged_line(session)
    for part in wrapped(plain(line)) if line else ():
        tw.write_line(part, yellow=True, bold=True)


def render_explanations(tw: Any, session: SessionResults) -> None:
    """Under --gpuperf-explain: every comparison's verdict and the rules that reached it."""
    from pytest_gpuperf.report.failure import explain_lines

    tw.write_sep("-", "gpuperf explain")
    for r in session.results:
        for c in r.comparisons:
            tw.write_line(plain(f"{r.measurement.key} {c.metric}: {c.verdict.value}"))
            for line in explain_lines(c):
                tw.write_line(plain(line))
        for note in r.measurement.notes:  # the notes the summary's lines only count
            tw.write_line(plain(f"{r.measurement.key} note ({note.kind.value}): {note.text}"))


def render_top_ops(tw: Any, session: SessionResults) -> None:
    """Under --gpuperf-profile: each measurement's trace to open and its top operators."""
    profiled = [(r.measurement.key, p) for r in session.results if (p := r.measurement.profile) is not None]
    if not profiled:
        return
    tw.write_sep("-", "gpuperf profile: top operators")
    for key, profile in profiled:
        path = profile.trace_path
        trace = f"trace: {path}, open in {PERFETTO}" if path else "trace not written: see the notes"
        tw.write_line(plain(f"{key}  ({trace})"))
        for line in format_top_ops(profile, n=8):
            tw.write_line(plain(f"  {line}"))


def format_top_ops(summary: ProfileSummary, n: int = 10) -> list[str]:
    """The top ``n`` operators with their share and time, under a line saying what ranks them."""
    kind = "device" if "cuda" in summary.activities else "CPU"
    if not summary.top_ops:
        return [f"no operator recorded {kind} time"]
    rows = [f"  {share:6.1%}  {format_time(ns):>10}  {name}" for name, ns, share in summary.top_ops[:n]]
    return [f"top operators by self {kind} time:", *rows]
