"""No side bias: an A/A compare-ref stays quiet when a process's state depends on how it was started.

The workload below does elementwise work on a 1 MiB tensor and is in a slow
state (three times the work) in any process that runs from a checkout of
another shape than the base's worktree: the user's own clone, whose ``.git`` is
a folder. That stands for every way a process run from the user's checkout
differs from one run from a scratch worktree (its paths, so its heap layout,
its caches), made deterministic here. The first pair (the session's own
process against the base worker) sees it and suspects a change; the fresh
pairs must not, because both of their sides run from checkouts made alike.
"""

from __future__ import annotations

import json

import pytest

from tests.test_compare_ref import ARGS, make_repo

pytestmark = pytest.mark.slow

SHAPE_DEPENDENT = """
from pathlib import Path

import torch

torch.set_num_threads(1)
X = torch.ones(1 << 18)  # 1 MiB of float32: each product is an allocation above glibc's mmap threshold
SLOW = (Path(__file__).resolve().parent / ".git").is_dir()
STEPS = 60 if SLOW else 20  # 1.5x in the wild; 3x here, so that the first pair suspects it on a busy host


def work():
    y = X
    for _ in range(STEPS):
        y = y * 1.0001
    return y


def test_elementwise(gpu_bench):
    gpu_bench(work)
"""


def verdicts(results: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["key"]: r["comparisons"][0] for r in results["results"]}


@pytest.mark.parametrize("sign", ["slower", "faster"])
def test_an_aa_compare_ref_with_a_checkout_dependent_state_stays_quiet(pytester: pytest.Pytester, sign: str) -> None:
    # "faster": the same state inverted, so the first pair suspects an improvement
    inverted = SHAPE_DEPENDENT.replace("60 if SLOW else 20", "20 if SLOW else 60")
    workload = inverted if sign == "faster" else SHAPE_DEPENDENT
    root = make_repo(pytester, head_work=20000, base_files={"test_perf.py": workload},
                     head_files={"test_perf.py": workload, "NOTES.txt": "an unrelated change\n"})  # fmt: skip
    # Apart from the planted 3x, each process of this workload lands in one of two allocator states
    # of its own, up to about 1.38x apart, independently per process: three fresh pairs can all
    # land head-slow by chance (pairs 1.239, 1.283, 1.275 once). That residual is measured in
    # docs/detection.md; this test is about the checkout-dependent state, so its threshold (50%)
    # sits above the per-process states and below the planted one.
    result = pytester.runpytest_subprocess(
        *ARGS, "--gpuperf-confirm-pairs=4", "--gpuperf-json=results.json", "--gpuperf-max-time=1.0",
        "--gpuperf-threshold=0.5",
    )  # fmt: skip
    time_c = verdicts(json.loads((root / "results.json").read_text()))["test_perf.py::test_elementwise::default"]
    first_pair = time_c["explanation"][0]
    # no false alarm: pairs whose processes land 1.38x apart may also leave four pairs short of resolving 50%
    assert time_c["verdict"] in ("unchanged", "not resolved"), (time_c, result.stdout.str())
    assert result.ret == 0, result.stdout.str()
    # the first pair did see the state: the confirmation is what kept the session quiet
    assert any(step["rule"] == "confirmation" for step in time_c["explanation"]), (first_pair, time_c)
