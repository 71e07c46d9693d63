"""benchmarks/gpu_fidelity.py: its table arithmetic, its refusal without CUDA, and a CPU smoke run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch
from benchmark_scripts import benchmark_script


@pytest.fixture(scope="module")
def fidelity() -> Iterator[ModuleType]:
    with benchmark_script("gpu_fidelity") as module:
        yield module


def test_rates_and_table(fidelity: ModuleType) -> None:
    row = fidelity.Row(
        case="copy", runner_ms=2.0, kernel_ms=1.6, do_bench_ms=None, work=4e9, unit="TB/s", precision=0.01
    )
    assert row.rate(2.0) == pytest.approx(2.0)  # 4 GB in 2 ms is 2 TB/s
    lines = fidelity.format_table([row])
    assert lines[0].split()[:3] == ["case", "runner", "p50"]
    assert set(lines[1]) == {"-"}
    cells = lines[2]
    assert "2000.00 us" in cells
    assert "1600.00 us" in cells
    assert "1.250" in cells  # runner / kernel
    assert "1.00%" in cells


def test_rate_is_none_without_a_time(fidelity: ModuleType) -> None:
    row = fidelity.Row(case="x", runner_ms=None, kernel_ms=0.0, do_bench_ms=None, work=1.0, unit="TFLOP/s")
    assert row.rate(row.runner_ms) is None
    assert row.rate(row.kernel_ms) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_cuda_run_without_cuda_exits_2(fidelity: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert fidelity.main(["--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_cpu_smoke_run_writes_measured_rows(fidelity: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "fidelity.json"
    args = ["--device", "cpu", "--sizes", "16", "--copy-mib", "1", "--max-time", "0.1", "--json", str(out)]
    assert fidelity.main(args) == 0
    doc = json.loads(out.read_text())
    assert doc["environment"]["device"] == "cpu"
    cases = [r["case"] for r in doc["rows"]]
    assert cases == ["copy 1 MiB", "bf16 mm 16^3"]
    for row in doc["rows"]:
        assert row["runner_ms"] > 0
        assert row["kernel_ms"] > 0
        assert row["do_bench_ms"] is None


def test_graph_rows_measure_eager_then_graph_mode(fidelity: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpuperf.config import MeasureSettings
    from pytest_gpuperf.model import Measurement

    asked: list[tuple[str, bool, bool]] = []

    def fake_runner(
        fn: object, device: torch.device, settings: MeasureSettings, name: str, *, head_start: bool = True
    ) -> Measurement:
        asked.append((name, settings.cuda_graph, head_start))
        ns = 4000.0 if not settings.cuda_graph else 1000.0
        return Measurement(test_id="t", name=name, samples_ns=(ns, ns), calls_per_sample=1, device="cpu", timer="x")

    monkeypatch.setattr(fidelity, "runner_measurement", fake_runner)
    monkeypatch.setattr(fidelity, "profiler_time_ms", lambda fn, device: 0.0005)
    eager, graph, bare = fidelity.graph_vs_eager(torch.device("cpu"), MeasureSettings(), 20)
    assert asked == [
        ("tiny x20 eager", False, True),
        ("tiny x20 graph", True, True),
        ("tiny x20 eager bare", False, False),
    ]
    assert (eager.case, graph.case, bare.case) == (
        "20 tiny add(s), eager", "20 tiny add(s), CUDA graph", "20 tiny add(s), eager, no head start"
    )  # fmt: skip
    assert eager.runner_ms == pytest.approx(0.004)
    assert graph.runner_ms == pytest.approx(0.001)
