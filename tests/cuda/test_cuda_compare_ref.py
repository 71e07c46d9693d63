"""Compare-ref on a GPU: the base worker and forked confirmation pairs each make their own CUDA context."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.cuda

PERF_TEST = """
import torch

A = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)

def chain(reps):
    x = A
    for _ in range(reps):
        x = x @ A
    return x

def test_chain(gpu_bench):
    gpu_bench(chain, {reps})

def test_unchanged(gpu_bench):
    gpu_bench(chain, 4)
"""


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_a_doubled_kernel_chain_is_confirmed_by_forked_pairs_on_cuda(pytester: pytest.Pytester) -> None:
    root = pytester.path
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_perf=PERF_TEST.format(reps=4))
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    pytester.makepyfile(test_perf=PERF_TEST.format(reps=8))
    _git(root, "commit", "-qam", "head")

    result = pytester.runpytest_subprocess(
        "--gpuperf", "--gpuperf-compare-ref=HEAD~1", "--gpuperf-device=cuda", "--gpuperf-threshold=0.10",
        "--gpuperf-max-time=1", "--gpuperf-confirm-pairs=3", "--gpuperf-json=results.json", "-p", "no:cacheprovider",
    )  # fmt: skip

    comparisons = {
        r["key"].split("::")[1]: r["comparisons"][0] for r in json.loads((root / "results.json").read_text())["results"]
    }
    assert result.ret == 1, result.stdout.str()
    chain = comparisons["test_chain"]
    assert chain["verdict"] == "regression" and chain["change"] > 0.5, chain
    assert "confirmed by" in chain["note"], chain["note"]  # the forked pairs measured on the GPU
    assert comparisons["test_unchanged"]["verdict"] != "regression", comparisons["test_unchanged"]
