"""Sub-microsecond benchmarks: timed in blocks of calls, pedantic's fixed iterations included; a real pytest run."""

from __future__ import annotations

import json

import pytest

SUITE = """
import os

N = int(os.environ.get("SHORT_N", "10"))

def tiny():
    return sum(range(N))

def test_auto(benchmark):
    benchmark(tiny)

def test_pedantic(benchmark):
    benchmark.pedantic(tiny, rounds=60, iterations=1)

def test_pedantic_setup(benchmark):
    benchmark.pedantic(tiny, setup=lambda: None, rounds=60, iterations=1)
"""
# A busy runner makes a planted change unstable (busy_policy=retake): judged here as measured.
ARGS = ["--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.05", "--gpuperf-max-time=0.3", "-p", "no:cacheprovider",
        "--gpuperf-busy-policy=judge", "--gpuperf-threshold=0.5"]  # fmt: skip


def results(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    data = json.loads((pytester.path / "out.json").read_text())
    return {r["measurement"]["test_id"].split("::")[-1]: r for r in data["results"]}


def test_sub_microsecond_calls_are_timed_in_blocks_and_an_unchanged_run_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_short=SUITE)
    pytester.makeconftest("import torch\ntorch.set_num_threads(1)\n")
    pytester.runpytest_subprocess("--gpuperf-update-baseline", *ARGS).assert_outcomes(passed=3)
    unchanged = pytester.runpytest_subprocess("--gpuperf", f"--gpuperf-json={pytester.path / 'out.json'}", *ARGS)
    unchanged.assert_outcomes(passed=3)
    measured = {name: r["measurement"] for name, r in results(pytester).items()}
    # a ~300 ns call: a 200 us block holds hundreds, whether sized freely or in pedantic's iterations
    assert measured["test_auto"]["calls_per_sample"] >= 100
    assert measured["test_pedantic"]["calls_per_sample"] >= 100
    assert any(n["text"].startswith("timed in blocks of") for n in measured["test_pedantic"]["notes"])
    assert measured["test_pedantic"]["samples_ns"] and len(measured["test_pedantic"]["samples_ns"]) == 60
    # a per-round setup must run before each block of exactly the iterations asked for
    assert measured["test_pedantic_setup"]["calls_per_sample"] == 1
    monkeypatch.setenv("SHORT_N", "200")  # a planted slowdown, about 8x
    slower = pytester.runpytest_subprocess("--gpuperf", *ARGS)
    slower.assert_outcomes(failed=3)
