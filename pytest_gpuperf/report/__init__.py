"""Reports of a session's results: each module renders, none decides.

``text`` makes user-controlled strings inert for each of them; every file is written
whole through ``pytest_gpuperf.files``; matplotlib is imported only for HTML and plots.

May import: ``measure`` (the environment probe), ``profiling``, ``verdict``, ``baseline``, the model and the leaves;
it renders and decides nothing.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf.errors import GpuperfError, WriteError
from pytest_gpuperf.files import write_atomic
from pytest_gpuperf.model import SessionResults

if TYPE_CHECKING:
    from pytest_gpuperf.report.history import History

__all__ = ["REPORTS", "ReportFailure", "ReportsWritten", "render", "write_reports"]


@dataclass(frozen=True)
class ReportFailure:
    """A report that could not be written: where, and why."""

    path: Path
    reason: str


@dataclass
class ReportsWritten:
    """What ``write_reports`` did: the files written, in order, and those it could not write."""

    written: list[Path] = field(default_factory=list)
    failed: list[ReportFailure] = field(default_factory=list)


Renderer = Callable[[SessionResults, "Path | None", "History | None"], str]


def _markdown(session: SessionResults, path: Path | None, history: History | None) -> str:
    from pytest_gpuperf.report.markdown import render_comment

    return render_comment(session, path.absolute().parent if path is not None else None)


def _results(session: SessionResults, path: Path | None, history: History | None) -> str:
    from pytest_gpuperf.report.results_json import dumps_results

    return dumps_results(session, path or "<stdout>")


def _benchmark(session: SessionResults, path: Path | None, history: History | None) -> str:
    from pytest_gpuperf.report.benchmark_export import render_benchmark_json

    return render_benchmark_json(session)


def _html(session: SessionResults, path: Path | None, history: History | None) -> str:
    from pytest_gpuperf.report.html import render_html

    return render_html(session, history)


def _table(session: SessionResults, path: Path | None, history: History | None) -> str:
    from pytest_gpuperf.report.notes import wrapped
    from pytest_gpuperf.report.rows import unjudged_line
    from pytest_gpuperf.report.terminal import PlainWriter, render_summary, resolution_terminal_lines
    from pytest_gpuperf.report.text import plain

    buffer = io.StringIO()
    writer = PlainWriter(buffer, color=False)
    render_summary(session, writer)
    for line in resolution_terminal_lines(session):
        writer.line(line)
    if unjudged := unjudged_line(session):  # last, as at the end of a session
        for line in wrapped(plain(unjudged)):
            writer.line(line)
    return buffer.getvalue()


# The one registry of reports, in the order files are written: the results JSON first, so a
# session its schema rejects is named before any other file is produced. The plugin's report
# options, ``--benchmark-json``, ``gpuperf report`` and ``gpuperf compare`` all render through it.
REPORTS: dict[str, Renderer] = {
    "json": _results,
    "markdown": _markdown,
    "benchmark-json": _benchmark,
    "html": _html,
    "table": _table,  # the terminal's table without colours (the CLI's default)
}


def render(name: str, session: SessionResults, *, path: Path | None = None, history: History | None = None) -> str:
    """Report ``name`` of ``REPORTS`` as text; ``path``: where it will be written (None: standard output).

    Links in a report (trace files) are relative to ``path``'s folder; ``history`` adds trend charts to the HTML.
    """
    if name not in REPORTS:
        raise ValueError(f"unknown report format {name!r}; known: {sorted(REPORTS)}")
    return REPORTS[name](session, path, history)


def write_reports(
    session: SessionResults,
    targets: Mapping[str, Path | str | None],
    *,
    history: History | None = None,
) -> ReportsWritten:
    """Write each report of ``REPORTS`` whose path ``targets`` gives, whole (``files.write_atomic``).

    A report that cannot be written (a full disk, a session the results schema rejects) is
    returned in ``failed`` for the caller to warn about: a report never fails a test run.
    """
    unknown = sorted(set(targets) - set(REPORTS))
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}; known: {sorted(REPORTS)}")
    outcome = ReportsWritten()
    for name in REPORTS:
        path = targets.get(name)
        if path is None:
            continue
        try:
            outcome.written.append(write_atomic(path, render(name, session, path=Path(path), history=history)))
        except (GpuperfError, OSError, ValueError) as exc:  # ValueError: json's NaN refusal
            outcome.failed.append(ReportFailure(Path(path), exc.reason if isinstance(exc, WriteError) else str(exc)))
    return outcome
