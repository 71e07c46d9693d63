"""Reports of a session's results: each module renders, none decides.

``terminal`` (the pytest summary), ``results_json`` (the machine-readable file
every other report can be made from), ``markdown`` (the PR comment), ``html``
(a self-contained page with distribution plots), ``benchmark_export``
(pytest-benchmark's JSON), ``compare_results`` and ``history`` (the CLI's).
matplotlib is imported only when an HTML report or a history plot is made.
"""

from __future__ import annotations

from pathlib import Path

from pytest_gpuperf.model import SessionResults

__all__ = ["write_reports"]


def write_reports(
    session: SessionResults,
    *,
    json_path: Path | str | None = None,
    markdown_path: Path | str | None = None,
    benchmark_json_path: Path | str | None = None,
    html_path: Path | str | None = None,
) -> list[Path]:
    """Write each report whose path is given; returns the paths written, in that order.

    The results JSON is written first and validated against its schema, so a
    malformed session fails before any other file is produced.
    """
    written: list[Path] = []
    if json_path is not None:
        from pytest_gpuperf.report.results_json import write_results

        written.append(write_results(json_path, session))
    if markdown_path is not None:
        from pytest_gpuperf.report.markdown import render_comment

        target = Path(markdown_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_comment(session), encoding="utf-8")
        written.append(target)
    if benchmark_json_path is not None:
        from pytest_gpuperf.report.benchmark_export import write_benchmark_json

        written.append(write_benchmark_json(benchmark_json_path, session))
    if html_path is not None:
        from pytest_gpuperf.report.html import write_html

        written.append(write_html(html_path, session))
    return written
