"""The whole loop on a GPU, through real pytest runs: record, rerun quietly, catch a slow-down and a memory rise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.cuda

PERF_TEST = """
import os
import torch

N = int(os.environ.get("E2E_N", "2048"))
REPS = int(os.environ.get("E2E_REPS", "4"))
EXTRA_MIB = int(os.environ.get("E2E_EXTRA_MIB", "0"))
A = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)

def work():
    x = A
    for _ in range(REPS):
        x = x @ A
    if EXTRA_MIB:
        scratch = torch.empty(EXTRA_MIB * 2**20, dtype=torch.uint8, device="cuda")
        scratch.fill_(1)
    return x

def test_matmul_chain(gpu_bench):
    result = gpu_bench.measure(work, flops=2 * N**3 * REPS)
    assert result.stats.count >= 1
"""

# No calibration on a GPU (the auto default) and a threshold far below the planted 50%.
GATE = ["--gpuperf-threshold=0.10", "--gpuperf-max-time=2", "-p", "no:cacheprovider"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_perf=PERF_TEST)
    pytester.makeini("[pytest]\n")
    return pytester


def _only_result(path: Path) -> dict[str, object]:
    document = json.loads(path.read_text())
    (result,) = document["results"]
    assert isinstance(result, dict)
    return result


def test_record_rerun_and_catch_regressions_on_cuda(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", "--gpuperf-json=rec.json", *GATE)
    recorded.assert_outcomes(passed=1)
    (baseline_file,) = (project.path / "baselines").rglob("*.json")
    # The device class names the GPU model, not the CPU.
    assert not baseline_file.parent.name.startswith("cpu"), baseline_file
    entry = next(iter(json.loads(baseline_file.read_text())["entries"].values()))
    assert entry["timer"] == "cuda_event"
    assert entry["device"].startswith("cuda")
    assert entry["memory"]["peak_allocated_bytes"] >= 3 * 2048 * 2048 * 2  # A and the chain's intermediates

    measurement = _only_result(project.path / "rec.json")["measurement"]
    assert isinstance(measurement, dict)
    assert measurement["timer"] == "cuda_event"
    health = measurement["health"]
    assert isinstance(health, dict)
    if "nvml_polls" in health:  # NVML present on the runner
        assert "temperature_before_c" in health and "sm_clock_min_mhz" in health, health

    unchanged = project.runpytest_subprocess("--gpuperf", *GATE)
    unchanged.assert_outcomes(passed=1)

    monkeypatch.setenv("E2E_REPS", "6")  # 50% more matmuls
    slower = project.runpytest_subprocess("--gpuperf", *GATE)
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines(["*test_matmul_chain*regression*"])

    monkeypatch.setenv("E2E_REPS", "4")
    monkeypatch.setenv("E2E_EXTRA_MIB", "512")
    hungrier = project.runpytest_subprocess("--gpuperf", "--gpuperf-json=mem.json", *GATE)
    hungrier.assert_outcomes(failed=1)
    comparisons = _only_result(project.path / "mem.json")["comparisons"]
    assert isinstance(comparisons, list)
    verdicts = {c["metric"]: c["verdict"] for c in comparisons}
    assert verdicts.get("memory.peak_allocated") == "regression", verdicts


def test_graph_mode_and_cold_cache_through_the_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_modes="""
import pytest
import torch

T = torch.zeros(1, device="cuda")
BUF = torch.ones(2**20, device="cuda")

def tiny_chain():
    v = T
    for _ in range(20):
        v = v + 1
    return v

def test_graph(gpu_bench):
    eager = gpu_bench.measure(tiny_chain, name="eager")
    graph = gpu_bench.measure(tiny_chain, name="graph", cuda_graph=True)
    assert graph.stats.median_ns < eager.stats.median_ns / 3, (graph.stats.median_ns, eager.stats.median_ns)

@pytest.mark.gpuperf(l2_flush=True)
def test_cold(gpu_bench):
    result = gpu_bench(BUF.sum)
    assert result.stats.count >= 1
"""
    )
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess(
        "--gpuperf", "--gpuperf-max-time=1", "--gpuperf-json=modes.json", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=2)
    document = json.loads((pytester.path / "modes.json").read_text())
    notes = [note for r in document["results"] for note in r["measurement"]["notes"]]
    assert not any("inactive" in note for note in notes), notes
