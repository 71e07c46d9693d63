"""A worker measures with the head's settings: one resolution of the settings for both sides."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pytest_gpuperf.config import GpuperfConfig, MeasureSettings
from pytest_gpuperf.plugin.options import build_config, worker_args

pytest.importorskip("pytest_benchmark")  # a dev dependency: its --benchmark-* options are repeated too

# Each process that configures pytest (the head, the base worker) writes what it was told.
CONFTEST = """
import json, os

def pytest_configure(config):
    seen = {name: config.getoption(name) for name in
            ("gpuperf_warmup_time", "gpuperf_time_limit", "gpuperf_calibrate", "gpuperf_l2_flush",
             "benchmark_disable_gc")}
    with open(os.environ["SEEN_LOG"], "a") as log:
        log.write(json.dumps({"pid": os.getpid(), **seen}) + "\\n")
"""

PERF_TEST = """
import torch

def test_mm(gpu_bench):
    a = torch.randn(32, 32)
    gpu_bench(torch.mm, a, a)
"""


def test_the_base_worker_gets_the_heads_resolved_settings_not_its_checkouts_ini(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = pytester.path
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_perf=PERF_TEST)
    pytester.makeini("[pytest]\ngpuperf_time_limit = 30\n")  # the base commit's ini
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    pytester.makeini("[pytest]\ngpuperf_time_limit = 120\ngpuperf_calibrate = on\n")  # the head's, uncommitted
    log = tmp_path / "seen.jsonl"
    monkeypatch.setenv("SEEN_LOG", str(log))
    run = pytester.runpytest_subprocess(
        "--gpuperf",
        "--gpuperf-compare-ref=HEAD",
        "--gpuperf-threshold=0.5",
        "--gpuperf-confirm-pairs=0",
        "--gpuperf-warmup-time=0.013",
        "--gpuperf-min-time=0.05",
        "--gpuperf-max-time=0.2",
        "-p",
        "no:cacheprovider",
        "--benchmark-disable-gc",  # pytest-benchmark's option, measured by the fixture in both processes
    )
    run.assert_outcomes(passed=1)
    head, worker = (json.loads(line) for line in log.read_text().splitlines())
    assert head["gpuperf_warmup_time"] == 0.013 and head["gpuperf_time_limit"] is None  # from its ini
    assert worker["gpuperf_warmup_time"] == 0.013  # the head's command line
    assert worker["gpuperf_time_limit"] == 120.0  # the head's ini, not the base commit's 30
    assert worker["gpuperf_l2_flush"] is False
    assert worker["benchmark_disable_gc"] is True


def test_worker_args_carry_every_measurement_setting_from_the_option_table() -> None:
    measure = MeasureSettings(warmup_time_s=0.2, min_time_s=0.1, max_time_s=2.0, target_precision=0.01,
                              time_limit_s=600.0, l2_flush=True, cuda_graph=True, energy=True)  # fmt: skip
    config = GpuperfConfig(measure=measure, calibrate="on", nvtx=False, nsight=True, busy_policy="judge")
    assert worker_args(config) == (
        "--gpuperf-warmup-time=0.2", "--gpuperf-min-time=0.1", "--gpuperf-max-time=2.0",
        "--gpuperf-target-precision=0.01", "--gpuperf-time-limit=600.0",
        "--gpuperf-l2-flush", "--gpuperf-cuda-graph", "--gpuperf-energy", "--gpuperf-nsight", "--gpuperf-no-nvtx",
        "--gpuperf-busy-policy=judge",
    )  # fmt: skip
    plain = worker_args(GpuperfConfig(calibrate="on", compare_ref="main"))
    assert not any(a.startswith("--gpuperf-calibrate") for a in plain)  # retired: no worker is told of it
    assert not any(a in plain for a in ("--gpuperf-l2-flush", "--gpuperf-no-nvtx", "--gpuperf-nsight"))


def test_the_resolved_config_gives_workers_the_plugin_args_then_the_settings(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngpuperf_warmup_time = 0.07\n")
    config = pytester.parseconfigure("-p", "no:randomly", "--gpuperf-l2-flush")
    resolved = build_config(config)
    assert resolved.worker_args[:2] == ("-p", "no:randomly")
    assert "--gpuperf-warmup-time=0.07" in resolved.worker_args and "--gpuperf-l2-flush" in resolved.worker_args
