"""Reports of a session's results: each module renders, none decides.

``terminal`` (the pytest summary), ``results_json`` (the machine-readable file
every other report can be made from), ``markdown`` (the PR comment), ``html``
(a self-contained page with distribution plots), ``benchmark_export``
(pytest-benchmark's JSON) and ``history`` (the CLI's).
``text`` makes user-controlled strings inert for each of them. Every file is
written whole through ``pytest_gpuperf.files``. matplotlib is imported only
when an HTML report or a history plot is made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf.errors import GpuperfError, WriteError
from pytest_gpuperf.model import SessionResults

if TYPE_CHECKING:
    from pytest_gpuperf.report.history import History

__all__ = ["REPORTS", "ReportFailure", "ReportsWritten", "write_reports"]


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


Writer = Callable[[Path, SessionResults, "History | None"], Path]


def _write_markdown(path: Path, session: SessionResults, history: History | None) -> Path:
    from pytest_gpuperf.files import write_atomic
    from pytest_gpuperf.report.markdown import render_comment

    return write_atomic(path, render_comment(session, path.absolute().parent))


def _write_results(path: Path, session: SessionResults, history: History | None) -> Path:
    from pytest_gpuperf.report.results_json import write_results

    return write_results(path, session)


def _write_benchmark(path: Path, session: SessionResults, history: History | None) -> Path:
    from pytest_gpuperf.report.benchmark_export import write_benchmark_json

    return write_benchmark_json(path, session)


def _write_html(path: Path, session: SessionResults, history: History | None) -> Path:
    from pytest_gpuperf.report.html import write_html

    return write_html(path, session, history)


# The one registry of file reports, in the order they are written: the results JSON first, so
# a session its schema rejects is named before any other file is produced.
REPORTS: dict[str, Writer] = {
    "json": _write_results,
    "markdown": _write_markdown,
    "benchmark-json": _write_benchmark,
    "html": _write_html,
}


def write_reports(
    session: SessionResults,
    targets: Mapping[str, Path | str | None],
    *,
    history: History | None = None,
) -> ReportsWritten:
    """Write each report of ``REPORTS`` whose path ``targets`` gives; one that fails does not stop the others.

    A report that cannot be written (a full disk, a folder where the file should be,
    a session the results schema rejects) is returned in ``failed`` with its reason,
    for the caller to warn about: a report is never a reason to fail a test run.
    ``history`` (the baselines' git history) adds trend charts to the HTML report.
    """
    unknown = sorted(set(targets) - set(REPORTS))
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}; known: {sorted(REPORTS)}")
    outcome = ReportsWritten()
    for name, write in REPORTS.items():
        path = targets.get(name)
        if path is None:
            continue
        try:
            outcome.written.append(write(Path(path), session, history))
        except WriteError as exc:
            outcome.failed.append(ReportFailure(Path(path), exc.reason))
        except (GpuperfError, OSError, ValueError) as exc:  # ValueError: json's NaN refusal
            outcome.failed.append(ReportFailure(Path(path), str(exc)))
    return outcome
