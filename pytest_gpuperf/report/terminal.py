"""The terminal summary: a table of every measurement and a line of counts.

``render_summary`` takes anything shaped like pytest's ``TerminalWriter``
(``sep``, ``line`` with ``red``/``green``/``yellow``/``bold`` markup and
optionally ``fullwidth``), so the plugin passes ``terminalreporter._tw`` and
the CLI passes a :class:`PlainWriter`. Every string from the tests is written
through ``text.plain``: no escape sequence of theirs reaches the terminal.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from typing import ClassVar, Protocol, TextIO

from pytest_gpuperf.model import SessionResults, Verdict
from pytest_gpuperf.report.rows import counts_line, headline, ordered
from pytest_gpuperf.report.text import plain
from pytest_gpuperf.report.units import format_change, format_precision, format_time, format_value

HEADERS = ("test", "measurement", "now", "baseline", "change", "precision", "verdict")
_MARKUP = {
    Verdict.REGRESSION: "red",
    Verdict.IMPROVEMENT: "green",
    Verdict.NOT_COMPARABLE: "yellow",
    Verdict.UNSTABLE: "yellow",
}
_MIN_TEST_WIDTH = 16
_GAP = "  "


class Writer(Protocol):
    def sep(self, sepchar: str, title: str | None = ..., **markup: bool) -> None: ...

    def line(self, s: str = ..., **markup: bool) -> None: ...


def _ellipsize_left(text: str, width: int) -> str:
    """Keep the end of a node id (the test name is what tells rows apart)."""
    if len(text) <= width:
        return text
    return "…" + text[len(text) - width + 1 :]


def _format_rows(cells: Sequence[Sequence[str]], width: int) -> list[str]:
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADERS))]
    overflow = sum(widths) + len(_GAP) * (len(widths) - 1) - width
    if overflow > 0:
        widths[0] = max(_MIN_TEST_WIDTH, widths[0] - overflow)
    right = {2, 3, 4, 5}  # numbers line up on the right
    lines = []
    for row in cells:
        parts = []
        for i, cell in enumerate(row):
            text = _ellipsize_left(cell, widths[i]) if i == 0 else cell
            parts.append(text.rjust(widths[i]) if i in right else text.ljust(widths[i]))
        lines.append(_GAP.join(parts).rstrip())
    return lines


def _title(session: SessionResults) -> str:
    if session.compare_ref:
        return f"gpuperf: compared with {plain(session.compare_ref)}"
    return f"gpuperf ({session.mode})"


def render_summary(session: SessionResults, tw: Writer) -> None:
    """Write the measurement table and the counts line to ``tw``."""
    tw.sep("=", _title(session))
    if not session.results:
        tw.line("no measurements")
        return
    heads = [headline(r) for r in ordered(session.results)]
    stat = {h.statistic for h in heads}
    headers = list(HEADERS)
    headers[2] = f"{stat.pop()} now" if len(stat) == 1 else "now"
    cells = [headers]
    for h in heads:
        m = h.result.measurement
        cells.append(
            [
                plain(m.test_id),
                plain(m.name),
                format_time(h.now_ns),
                format_time(h.baseline_ns) if h.baseline_ns is not None else "-",
                format_change(h.change),
                format_precision(m.precision),
                h.verdict.value,
            ]
        )
    width = int(getattr(tw, "fullwidth", 0) or shutil.get_terminal_size((100, 24)).columns)
    lines = _format_rows(cells, width)
    tw.line(lines[0], bold=True)
    for h, text in zip(heads, lines[1:], strict=True):
        markup = _MARKUP.get(h.verdict)
        tw.line(text, **({markup: True} if markup else {}))
        for c in h.others:
            detail = plain(
                f"    {c.metric}: {format_value(c.current, c.unit)} vs "
                f"{format_value(c.baseline, c.unit)} ({format_change(c.change)}) {c.verdict.value}"
            )
            other = _MARKUP.get(c.verdict)
            tw.line(detail, **({other: True} if other else {}))
        if h.result.measurement.unstable_reason:
            tw.line(f"    unstable: {plain(h.result.measurement.unstable_reason)}", yellow=True)
    counts = counts_line(session)
    has_regression = any(h.verdict is Verdict.REGRESSION for h in heads)
    tw.line(f"gpuperf: {counts}", bold=True, **({"red": True} if has_regression else {"green": True}))


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
