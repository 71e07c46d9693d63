"""Every verdict explained: the rules in the failure, the results JSON and under --gpuperf-explain."""

from __future__ import annotations

import json

import pytest

from tests.perf_project import GATE, make_project


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_project(pytester)


def test_explain_prints_every_measurements_rules_and_the_json_keeps_them(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.runpytest_subprocess("--gpuperf-update-baseline", *GATE).assert_outcomes(passed=2)
    run = project.runpytest_subprocess("--gpuperf", "--gpuperf-explain", "--gpuperf-json=r.json", *GATE)
    run.assert_outcomes(passed=2)
    run.stdout.fnmatch_lines([
        "*gpuperf explain*",
        "test_perf.py::test_matmul::default time.p50: *",
        "    [[]significance[]] * -> *",
    ])  # fmt: skip
    document = json.loads((project.path / "r.json").read_text())
    (time,) = [c for c in document["results"][0]["comparisons"] if c["kind"] == "time"]
    assert [step["rule"] for step in time["explanation"]][:2] == ["noise-floor", "significance"]
    quiet = project.runpytest_subprocess("--gpuperf", *GATE)
    assert "gpuperf explain" not in quiet.stdout.str()

    monkeypatch.setenv("DEMO_REPS", "12")  # three times the work: the failure says which rules decided
    slower = project.runpytest_subprocess("--gpuperf", *GATE)
    assert slower.ret == 1
    slower.stdout.fnmatch_lines([
        "*performance regression in*test_matmul*",
        "*rules:*",
        "*[[]significance[]]*regression*",
        "*[[]confirmation[]] confirmed by 1 re-measure*",
    ])  # fmt: skip
