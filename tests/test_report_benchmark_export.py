from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_report_helpers import make_session

from pytest_gpuperf.report import write_reports
from pytest_gpuperf.report.benchmark_export import FORMAT_VERSION, benchmark_stats

pytest_benchmark_stats = pytest.importorskip("pytest_benchmark.stats", reason="pytest-benchmark is not installed")
pytest_benchmark_file = pytest.importorskip("pytest_benchmark.storage.file")
pytest_benchmark_logger = pytest.importorskip("pytest_benchmark.logger")


def test_document_layout(tmp_path: Path) -> None:
    path = write_reports(make_session(), {"benchmark-json": tmp_path / "bench.json"}).written[0]
    doc = json.loads(path.read_text())
    assert set(doc) == {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    assert doc["version"] == FORMAT_VERSION
    assert doc["commit_info"]["id"] == "a" * 40
    assert doc["machine_info"]["gpuperf"]["device_class"] == "nvidia-h100-80gb-hbm3"
    bench = {b["fullname"]: b for b in doc["benchmarks"]}
    mm = bench["tests/perf/test_matmul.py::test_matmul[fp16-4096]"]
    assert mm["name"] == "test_matmul[fp16-4096]"
    assert mm["param"] == "fp16-4096"
    assert mm["stats"]["median"] == pytest.approx(1.25e-3)  # seconds
    assert mm["stats"]["iterations"] == 10
    assert mm["extra_info"]["gpuperf_verdict"] == "regression"
    assert mm["extra_info"]["peak_allocated_bytes"] == 3 * 2**30
    assert mm["extra_info"]["flop_per_s"] == pytest.approx(2 * 4096**3 / 1.25e-3)
    # A measurement other than "default" is its own benchmark.
    assert "tests/perf/test_conv.py::test_conv::forward" in bench
    stats_fields = set(pytest_benchmark_stats.Stats.fields) | {"data", "iterations"}
    assert all(set(b["stats"]) == stats_fields for b in doc["benchmarks"])


def test_stats_agree_with_pytest_benchmark_on_the_same_data() -> None:
    data = [3e-6, 1e-6, 2.5e-6, 2e-6, 9e-6, 2.2e-6, 1.9e-6]
    ours = benchmark_stats(data)
    theirs = pytest_benchmark_stats.Stats()
    for d in data:
        theirs.update(d)
    for field in ("min", "max", "mean", "stddev", "rounds", "median", "total", "ops", "stddev_outliers"):
        assert ours[field] == pytest.approx(getattr(theirs, field)), field
    # Quartiles follow gpuperf's linear interpolation; outliers and fences follow from them.
    assert ours["q1"] <= ours["median"] <= ours["q3"]
    assert ours["iqr_outliers"] == 1  # the 9 us sample
    assert ours["hd15iqr"] == 3e-6
    assert ours["outliers"] == f"{ours['stddev_outliers']};1"


def test_pytest_benchmark_storage_loads_the_export(tmp_path: Path) -> None:
    path = write_reports(make_session(), {"benchmark-json": tmp_path / "runs" / "0001_gpuperf.json"}).written[0]
    logger = pytest_benchmark_logger.Logger(pytest_benchmark_logger.Logger.QUIET)
    storage = pytest_benchmark_file.FileStorage(tmp_path / "runs", logger=logger)
    loaded = list(storage.load_benchmarks(str(path)))
    assert len(loaded) == 8
    flash = next(b for b in loaded if b["name"] == "test_flash")
    assert flash["median"] == pytest.approx(2.5)
    assert flash["rounds"] == 12


def _pytest_benchmark_cli() -> list[str]:
    exe = shutil.which("pytest-benchmark", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "pytest_benchmark"]


def test_pytest_benchmark_compare_renders_the_export(tmp_path: Path) -> None:
    path = write_reports(make_session(), {"benchmark-json": tmp_path / "bench.json"}).written[0]
    csv_base = tmp_path / "table"
    proc = subprocess.run(
        [*_pytest_benchmark_cli(), "compare", str(path), "--columns=min,median,rounds", f"--csv={csv_base}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "benchmark: 8 tests" in proc.stdout
    assert "test_matmul[fp16-4096]" in proc.stdout
    assert "test_conv::forward" in proc.stdout
    csv_text = csv_base.with_suffix(".csv").read_text()
    header, *rows = csv_text.splitlines()
    assert header.split(",")[-3:] == ["min", "median", "rounds"]
    flash = next(line.split(",") for line in rows if line.startswith("tests/perf/test_attn.py::test_flash,"))
    assert float(flash[-2]) == pytest.approx(2.5)  # the median, in seconds
    assert flash[-1] == "12"
