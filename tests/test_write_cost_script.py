"""benchmarks/write_cost.py: the suite it writes and what it reads back from the write run."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from benchmark_scripts import benchmark_script


def test_the_suite_is_pytest_benchmark_tests_a_quarter_pedantic() -> None:
    with benchmark_script("write_cost") as script:
        source = script.suite(8)
    tests = [node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)]
    assert len(tests) == 8 and all(t.args.args[0].arg == "benchmark" for t in tests)
    assert source.count("benchmark.pedantic(") == 2


def test_the_write_runs_readings_and_waits_are_counted(tmp_path: Path) -> None:
    results = tmp_path / "write.json"
    spent = "the runner was busy (...) and this session's time for waiting for quiet windows is spent (3.5s): busy"
    measured = [
        {"notes": ["waited 1.5s for the runner to be quiet (...)"], "process_medians_ns": [1.0, 1.1]},
        {"notes": [spent], "process_medians_ns": [1.0, 1.2, 1.1]},
        {"notes": [], "process_medians_ns": None},
    ]
    results.write_text(json.dumps({"results": [{"measurement": m} for m in measured]}))
    with benchmark_script("write_cost") as script:
        counted = script.write_readings(results)
    assert counted == {"measurements": 3, "readings": 6, "waited_s": 3.5, "busy": 1}
