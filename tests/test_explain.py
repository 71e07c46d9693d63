"""Every verdict explained: the rules in the failure, the results JSON and under --gpuperf-explain."""

from __future__ import annotations

import json

import pytest

PERF_TEST = """
import os
import torch

REPS = int(os.environ.get("REPS", "4"))
A = torch.randn(128, 128) / 12

def work():
    x = A
    for _ in range(REPS):
        x = torch.tanh(x @ A)
    return x

def test_matmul(gpu_bench):
    gpu_bench(work)
"""

GATE = ["--gpuperf-threshold=0.25", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.5", "-p", "no:cacheprovider"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_perf=PERF_TEST)
    pytester.makeconftest("import torch\ntorch.set_num_threads(1)\n")
    pytester.makeini("[pytest]\n")
    return pytester


def test_explain_prints_every_measurements_rules_and_the_json_keeps_them(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.runpytest_subprocess("--gpuperf-update-baseline", *GATE).assert_outcomes(passed=1)
    run = project.runpytest_subprocess("--gpuperf", "--gpuperf-explain", "--gpuperf-json=r.json", *GATE)
    run.assert_outcomes(passed=1)
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

    monkeypatch.setenv("REPS", "12")  # three times the work: the failure says which rules decided
    slower = project.runpytest_subprocess("--gpuperf", *GATE)
    assert slower.ret == 1
    slower.stdout.fnmatch_lines([
        "*performance regression in*test_matmul*",
        "*rules:*",
        "*[[]significance[]]*regression*",
        "*[[]confirmation[]] confirmed by 1 re-measure*",
    ])  # fmt: skip
