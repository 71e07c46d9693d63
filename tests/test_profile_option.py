"""--gpuperf-profile on a CPU: a Chrome trace per measurement and the top operators in the terminal."""

from __future__ import annotations

import json

import pytest


def test_profile_writes_trace_and_prints_top_ops(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_prof="""
        import torch

        A = torch.randn(64, 64)

        def test_mm(gpu_bench):
            gpu_bench.measure(lambda: torch.relu(A @ A), name="relu_mm")
        """
    )
    out = pytester.path / "prof"
    result = pytester.runpytest_subprocess(
        "--gpuperf",
        f"--gpuperf-profile={out}",
        f"--gpuperf-json={pytester.path / 'r.json'}",
        "--gpuperf-min-time=0.03",
        "--gpuperf-max-time=0.2",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*gpuperf profile: top operators*", "*test_mm::relu_mm*", "*aten::*"])
    traces = list(out.glob("*.json"))
    assert len(traces) == 1
    assert "traceEvents" in json.loads(traces[0].read_text())
    results = json.loads((pytester.path / "r.json").read_text())["results"]
    profile = results[0]["measurement"]["profile"]
    assert profile["top_ops"] and profile["trace_path"].endswith(".json")
