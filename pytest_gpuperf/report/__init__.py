"""Reports of a session's results: each module renders, none decides.

``terminal`` (the pytest summary), ``results_json`` (the machine-readable file
every other report can be made from), ``markdown`` (the PR comment), ``html``
(a self-contained page with distribution plots), ``benchmark_export``
(pytest-benchmark's JSON), ``compare_results`` and ``history`` (the CLI's).
``text`` makes user-controlled strings inert for each of them. Every file is
written whole through ``pytest_gpuperf.files``. matplotlib is imported only
when an HTML report or a history plot is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_gpuperf.errors import GpuperfError, WriteError
from pytest_gpuperf.model import SessionResults

__all__ = ["ReportFailure", "ReportsWritten", "write_reports"]


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


def _write_markdown(path: Path, session: SessionResults) -> Path:
    from pytest_gpuperf.files import write_atomic
    from pytest_gpuperf.report.markdown import render_comment

    return write_atomic(path, render_comment(session))


def _write_results(path: Path, session: SessionResults) -> Path:
    from pytest_gpuperf.report.results_json import write_results

    return write_results(path, session)


def _write_benchmark(path: Path, session: SessionResults) -> Path:
    from pytest_gpuperf.report.benchmark_export import write_benchmark_json

    return write_benchmark_json(path, session)


def _write_html(path: Path, session: SessionResults) -> Path:
    from pytest_gpuperf.report.html import write_html

    return write_html(path, session)


def write_reports(
    session: SessionResults,
    *,
    json_path: Path | str | None = None,
    markdown_path: Path | str | None = None,
    benchmark_json_path: Path | str | None = None,
    html_path: Path | str | None = None,
) -> ReportsWritten:
    """Write each report whose path is given, in that order; one that fails does not stop the others.

    A report that cannot be written (a full disk, a folder where the file should be,
    a session the results schema rejects) is returned in ``failed`` with its reason,
    for the caller to warn about: a report is never a reason to fail a test run.
    """
    writers: list[tuple[Path | str | None, Callable[[Path, SessionResults], Path]]] = [
        (json_path, _write_results),
        (markdown_path, _write_markdown),
        (benchmark_json_path, _write_benchmark),
        (html_path, _write_html),
    ]
    outcome = ReportsWritten()
    for path, write in writers:
        if path is None:
            continue
        try:
            outcome.written.append(write(Path(path), session))
        except WriteError as exc:
            outcome.failed.append(ReportFailure(Path(path), exc.reason))
        except (GpuperfError, OSError, ValueError) as exc:  # ValueError: json's NaN refusal
            outcome.failed.append(ReportFailure(Path(path), str(exc)))
    return outcome
