"""Environment drift in the reports (report/drift.py): what changed since the reference, and when it is the cause."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from perf_project import GATE, make_project
from test_report_helpers import BASE_SESSION, ENV, HEAD_SESSION, plain_session, timed

from pytest_gpuperf.cli.compare import compare_sessions
from pytest_gpuperf.model import Verdict
from pytest_gpuperf.report.drift import drift_sentences, session_drift
from pytest_gpuperf.report.html import render_html
from pytest_gpuperf.report.results_json import write_results
from tests.cli_helpers import run

NEW_DRIVER = dataclasses.replace(ENV, driver="575.51.03", torch="2.14.0")
EVERY_ONE_SLOWER = plain_session(
    [timed("tests/t.py::test_slower", 1_500_000.0), timed("tests/t.py::test_same", 75_000.0)],
    HEAD_SESSION.provenance,
    "2026-01-02T00:00:00+00:00",
)


def test_gpuperf_compare_names_a_driver_and_torch_change_between_base_and_head(tmp_path: Path) -> None:
    base = write_results(tmp_path / "base.json", BASE_SESSION)
    head = write_results(tmp_path / "head.json", dataclasses.replace(HEAD_SESSION, environment=NEW_DRIVER))
    code, out, _ = run("compare", str(base), str(head))
    assert code == 1
    assert "gpuperf: environment changed since the base: driver 570.86.15 -> 575.51.03, torch 2.13.0 -> 2.14.0" in out
    assert "likelier cause" not in out  # one slower, one faster, one unchanged: the code moved them
    same = run("compare", str(base), str(write_results(tmp_path / "same.json", HEAD_SESSION)))[1]
    assert "environment changed" not in same


def test_when_every_measurement_moved_together_the_environment_is_named_the_likelier_cause(tmp_path: Path) -> None:
    base = write_results(tmp_path / "base.json", BASE_SESSION)
    head = write_results(tmp_path / "head.json", dataclasses.replace(EVERY_ONE_SLOWER, environment=NEW_DRIVER))
    code, out, _ = run("compare", str(base), str(head))
    assert code == 1 and "2 regressions" in out
    assert (
        "gpuperf: all 2 measurements judged got slower, each against the base taken in another environment: "
        "the environment is the likelier cause than the code"
    ) in out
    unchanged_environment = run("compare", str(base), str(write_results(tmp_path / "same.json", EVERY_ONE_SLOWER)))
    assert "likelier cause" not in unchanged_environment[1]  # both slower, the same environment: the code


def test_one_moved_measurement_says_nothing_of_a_common_cause() -> None:
    one = dataclasses.replace(EVERY_ONE_SLOWER, results=EVERY_ONE_SLOWER.results[:1], environment=NEW_DRIVER)
    drift = session_drift(compare_sessions(BASE_SESSION, one).session)
    assert drift.together is None and not drift.environment_likelier
    assert drift_sentences(drift) == [
        "environment changed since the base: driver 570.86.15 -> 575.51.03, torch 2.13.0 -> 2.14.0"
    ]


def test_references_taken_in_different_environments_are_listed_apart() -> None:
    compared = compare_sessions(BASE_SESSION, dataclasses.replace(EVERY_ONE_SLOWER, environment=NEW_DRIVER)).session
    first, second = compared.results
    assert first.baseline is not None
    older = dataclasses.replace(first.baseline, environment=dataclasses.replace(ENV, torch="2.12.0"))
    mixed = dataclasses.replace(compared, results=(dataclasses.replace(first, baseline=older), second))
    drift = session_drift(mixed)
    assert drift_sentences(drift) == [
        "environment changed since the base (for 1 measurement): driver 570.86.15 -> 575.51.03, torch 2.12.0 -> 2.14.0",
        "environment changed since the base (for 1 measurement): driver 570.86.15 -> 575.51.03, torch 2.13.0 -> 2.14.0",
        "all 2 measurements judged got slower, each against the base taken in another environment: the environment "
        "is the likelier cause than the code",
    ]
    assert drift.together is Verdict.REGRESSION


def test_compare_ref_measures_both_sides_in_one_environment_so_nothing_drifts() -> None:
    from test_report_helpers import make_session

    assert drift_sentences(session_drift(make_session())) == []


def test_the_html_report_says_it_too(tmp_path: Path) -> None:
    compared = compare_sessions(BASE_SESSION, dataclasses.replace(EVERY_ONE_SLOWER, environment=NEW_DRIVER)).session
    page = render_html(compared)
    assert '<p class="note">environment changed since the base: driver 570.86.15 -&gt; 575.51.03' in page


def test_baseline_mode_names_a_torch_change_since_the_stored_entry(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(pytester)
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *GATE).assert_outcomes(passed=2)
    (path,) = (project.path / "baselines").rglob("*.json")
    document = json.loads(path.read_text())
    (entry,) = document["entries"].values()
    recorded = entry["environment"]["torch"]
    entry["environment"]["torch"] = "2.0.0"  # as if written before the runner's torch was upgraded
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    gate = project.runpytest_subprocess("--gpuperf", *GATE)
    gate.assert_outcomes(passed=2)
    gate.stdout.fnmatch_lines([f"gpuperf: environment changed since the baseline: torch 2.0.0 -> {recorded}"])
