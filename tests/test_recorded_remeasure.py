"""Measurements recorded from elsewhere (DDP ranks) are confirmed by re-measuring, like any other."""

from __future__ import annotations

import json

import pytest

RECORDED = """
import os

from pytest_gpuperf import Measurement

SLOW = float(os.environ.get("SLOW", "1"))


def make(scale):
    samples = tuple(1e6 * scale * (1 + 0.001 * i) for i in range(60))
    return Measurement(test_id="", name="ranks", samples_ns=samples, calls_per_sample=1, device="cpu",
                       timer="perf_counter", round_medians_ns=(1e6 * scale,) * 4)


def test_transient(gpu_bench):
    gpu_bench.record(make(SLOW), remeasure=lambda: make(1.0))


def test_lasting(gpu_bench):
    gpu_bench.record(make(SLOW), remeasure=lambda: make(SLOW))


def test_no_way_to_remeasure(gpu_bench):
    gpu_bench.record(make(SLOW))
"""


def test_suspected_regression_of_a_recorded_measurement_is_re_measured(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_rec=RECORDED)
    args = ["--gpuperf", "-p", "no:cacheprovider", "--gpuperf-busy-policy=judge"]
    pytester.runpytest_subprocess(*args, "--gpuperf-update-baseline").assert_outcomes(passed=3)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    data = json.loads(path.read_text())
    for entry in data["entries"].values():
        # whether the machine is slow is the reference's concern: without one, a slow phase of a shared
        # host between the two runs cannot turn the unconfirmable one "unstable"
        entry.pop("reference_ns", None)
    path.write_text(json.dumps(data, indent=2))
    monkeypatch.setenv("SLOW", "2")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*test_transient::ranks: suspected regression not confirmed*"])
    assert "FAILED test_rec.py::test_transient" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*FAILED test_rec.py::test_lasting*", "*FAILED test_rec.py::test_no_way*"])
