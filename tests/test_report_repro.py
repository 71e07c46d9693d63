"""The command that re-runs a regression (report/repro.py): what it names, and that it reproduces the failure."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

import pytest
from perf_project import GATE, make_project
from test_report_helpers import BASE, make_session

from pytest_gpuperf.model import Provenance, SessionResults
from pytest_gpuperf.modes import Mode
from pytest_gpuperf.plugin.options import OPTIONS, repro_args
from pytest_gpuperf.report.html import render_html
from pytest_gpuperf.report.repro import Rerun, rerun_of

HOSTILE_ID = "tests/perf/test_x.py::test_y[$(touch pwned) 'a b'; rm -rf ~]"


def _session(mode: Mode, *, base: Provenance | None = None, ref: str | None = None) -> SessionResults:
    return dataclasses.replace(make_session(), mode=mode, base_provenance=base, compare_ref=ref,
                               repro_args=("-p", "no:randomly", "--gpuperf-threshold=0.05"))  # fmt: skip


def _regression(session: SessionResults) -> str:
    again = rerun_of(session)
    assert again is not None
    m = next(r.measurement for r in session.results if r.verdict.value == "regression")
    return again.command(m)


def test_baseline_mode_reruns_against_the_baselines_with_the_sessions_options() -> None:
    assert _regression(_session(Mode.BASELINE)) == (
        "pytest 'tests/perf/test_matmul.py::test_matmul[fp16-4096]' --gpuperf --gpuperf-device=cuda:0 "
        "-p no:randomly --gpuperf-threshold=0.05"
    )


def test_compare_ref_reruns_against_the_base_commit_not_the_moving_ref() -> None:
    command = _regression(_session(Mode.COMPARE_REF, base=BASE, ref="origin/main"))
    assert f"--gpuperf-compare-ref={'b' * 40} --gpuperf-device=cuda:0" in command
    unrecorded = _regression(_session(Mode.COMPARE_REF, base=Provenance(), ref="origin/main"))
    assert "--gpuperf-compare-ref=origin/main " in unrecorded


def test_two_compared_files_rerun_as_compare_ref_against_the_base_files_commit() -> None:
    assert f"--gpuperf-compare-ref={'b' * 40} " in _regression(_session(Mode.COMPARE_FILES, base=BASE, ref="b.json"))
    # the base file's name is no revision: without its commit there is nothing to re-run against
    assert rerun_of(_session(Mode.COMPARE_FILES, base=Provenance(), ref="b.json")) is None


def test_every_word_is_quoted_for_a_posix_shell() -> None:
    session = make_session()
    first = session.results[0].measurement
    command = Rerun(None, ("--size=$(id)",)).command(dataclasses.replace(first, test_id=HOSTILE_ID))
    assert shlex.split(command) == ["pytest", HOSTILE_ID, "--gpuperf", "--gpuperf-device=cuda:0", "--size=$(id)"]


def test_the_html_report_gives_each_regression_its_command() -> None:
    session = _session(Mode.BASELINE)
    page = render_html(session)
    assert page.count('<p class="repro">') == 1
    assert (
        "Reproduce: <code>pytest &#x27;tests/perf/test_matmul.py::test_matmul[fp16-4096]&#x27; --gpuperf "
        "--gpuperf-device=cuda:0 -p no:randomly --gpuperf-threshold=0.05</code>"
    ) in page


def _defaults() -> dict[str, object]:
    return {o.dest: o.default for o in OPTIONS}


def test_repro_args_are_the_options_off_their_defaults_that_change_a_measurement() -> None:
    assert repro_args(_defaults()) == ()
    values = {**_defaults(), "gpuperf_threshold": 0.05, "gpuperf_metric": "p90", "gpuperf_l2_flush": True,
              "gpuperf_busy_policy": "judge", "gpuperf_remeasure": 2}  # fmt: skip
    assert repro_args(values) == (
        "--gpuperf-threshold=0.05", "--gpuperf-metric=p90", "--gpuperf-remeasure=2", "--gpuperf-l2-flush",
        "--gpuperf-busy-policy=judge",
    )  # fmt: skip
    # the mode and the device (the command names them), reports, traces and the store's URL are never repeated
    private = {**_defaults(), "gpuperf": True, "gpuperf_compare_ref": "main", "gpuperf_device": "cuda:1",
               "gpuperf_json": Path("/runner/r.json"), "gpuperf_html": Path("/runner/r.html"),
               "gpuperf_profile": Path("/runner/traces"), "gpuperf_explain": True,
               "gpuperf_history": "postgresql://perf:secret@db/perf"}  # fmt: skip
    assert repro_args(private) == ()


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_project(pytester)


def test_the_failure_message_gives_a_command_that_fails_again(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makeini("[pytest]\ngpuperf_memory_threshold = 0.5\n")
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *GATE).assert_outcomes(passed=2)
    monkeypatch.setenv("DEMO_REPS", "12")  # three times the work
    results = project.path / "results.json"
    slower = project.runpytest_subprocess("--gpuperf", *GATE, f"--gpuperf-json={results}",
                                          f"--gpuperf-html={project.path / 'report.html'}")  # fmt: skip
    slower.assert_outcomes(passed=1, failed=1)
    # the failure's own text first (under CI=true, pytest's short summary repeats the message whole)
    line = next(line for line in slower.stdout.lines if "reproduce: pytest" in line)
    command = line.split("reproduce: ", 1)[1]
    assert command == (
        "pytest test_perf.py::test_matmul --gpuperf --gpuperf-device=cpu -p no:cacheprovider "
        "--gpuperf-threshold=0.25 --gpuperf-memory-threshold=0.5 --gpuperf-min-time=0.1 --gpuperf-max-time=0.6 "
        "--gpuperf-busy-policy=judge"
    )  # the ini's memory threshold too: a developer's checkout may not have the CI's ini
    assert json.loads(results.read_text())["repro_args"] == shlex.split(command)[4:]
    assert command.replace("'", "&#x27;") in (project.path / "report.html").read_text()
    again = project.runpytest_subprocess(*shlex.split(command)[1:])
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["*performance regression in test_perf.py::test_matmul::default*"])
