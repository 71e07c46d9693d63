"""A report that cannot be written is a warning naming it; the other reports and the exit code stand."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_report_helpers import make_session

from pytest_gpuperf.report import ReportFailure, write_reports


def test_each_report_is_written_though_an_earlier_one_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    folder = tmp_path / "bench.json"
    folder.mkdir()  # a folder where the file should be
    reports = write_reports(
        make_session(),
        {
            "json": blocker / "results.json",
            "markdown": tmp_path / "comment.md",
            "benchmark-json": folder,
            "html": tmp_path / "report.html",
        },
    )
    assert reports.written == [tmp_path / "comment.md", tmp_path / "report.html"]
    assert [f.path for f in reports.failed] == [blocker / "results.json", folder]
    assert reports.failed[0].reason == f"cannot create the folder {blocker}: File exists"
    assert reports.failed[1].reason == "it is a folder; give the path of a file"
    assert (tmp_path / "comment.md").read_text().startswith("<!-- pytest-gpuperf-comment -->")
    assert (tmp_path / "report.html").is_file()


def test_a_session_the_schema_rejects_fails_its_results_file_only(tmp_path: Path) -> None:
    broken = dataclasses.replace(make_session(), mode="")
    reports = write_reports(broken, {"json": tmp_path / "r.json", "markdown": tmp_path / "c.md"})
    assert reports.written == [tmp_path / "c.md"]
    (failure,) = reports.failed
    assert failure == ReportFailure(tmp_path / "r.json", failure.reason)
    assert "$.mode" in failure.reason
    assert not (tmp_path / "r.json").exists()


PERF_TEST = """
import torch

A = torch.randn(64, 64)

def test_mm(gpu_bench):
    gpu_bench(lambda: A @ A)
"""


def test_an_unwritable_report_is_a_warning_and_the_run_still_passes(
    pytester: pytest.Pytester, fast_args: list[str]
) -> None:
    pytester.makepyfile(test_perf=PERF_TEST)
    blocker = pytester.path / "not-a-folder"
    blocker.write_text("")
    bad = blocker / "results.json"
    result = pytester.runpytest_subprocess(
        "--gpuperf", f"--gpuperf-json={bad}", "--gpuperf-markdown=ok.md", *fast_args, "-p", "no:cacheprovider"
    )
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*warnings summary*", "*GpuperfWarning*"])  # written at the session's end
    result.stdout.fnmatch_lines([f"gpuperf: could not write {bad}: *"])
    assert "Traceback" not in result.stdout.str()
    assert (pytester.path / "ok.md").read_text().startswith("<!-- pytest-gpuperf-comment -->")


def test_under_w_error_the_warning_does_not_crash_the_run(pytester: pytest.Pytester, fast_args: list[str]) -> None:
    pytester.makepyfile(test_perf=PERF_TEST)
    (pytester.path / "taken").mkdir()
    result = pytester.runpytest_subprocess(
        "-W", "error", "--gpuperf", "--gpuperf-html=taken", *fast_args, "-p", "no:cacheprovider"
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"*gpuperf: could not write {pytester.path / 'taken'}: *"])
    assert "INTERNALERROR" not in result.stdout.str()
