"""Confirmation workers kept warm: started once per session, reused for every suspected test, replaced when broken.

Real sessions on real git repositories. Each head worker that imports the test
file takes a numbered slot (a file in ``SLOTS_DIR``, in import order), so the
test can count the confirmation's head processes and make one of them slow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_compare_ref import ARGS, SPIN_WITH_ENVIRONMENT, git, make_repo, worktrees

pytestmark = pytest.mark.slow

# WORK steps per call: ``own`` in the head's own pytest process, ``slot_work`` (of SLOT) in the head
# workers. A base worker runs the base commit's 20000 steps.
HEAD = (
    SPIN_WITH_ENVIRONMENT.format(
        setup="""
def _slot():
    here = os.environ["SLOTS_DIR"]  # not the file's folder: head workers run from a copy of the checkout
    n = 0
    while True:  # a unique number per head worker, in the order they import this file
        try:
            os.close(os.open(os.path.join(here, f"slot-{{n}}"), os.O_CREAT | os.O_EXCL))
            return n
        except FileExistsError:
            n += 1

SLOT = _slot() if "GPUPERF_WORKER_FD" in os.environ else None
WORK = {own} if SLOT is None else {slot_work}
""",
        check="pass",
    )
    + """

def test_spin_again(gpu_bench):
    gpu_bench(spin)
"""
)


def run(pytester: pytest.Pytester, head: str, *args: str) -> tuple[pytest.RunResult, dict[str, dict[str, Any]]]:
    root = make_repo(pytester, head_work=20001, extra="\n\ndef test_spin_again(gpu_bench):\n    gpu_bench(spin)\n")
    pytester.makepyfile(test_perf=head)
    git(root, "commit", "-qam", "head")
    # the code measured lives in the test file, which the head extends: each side runs its own
    result = pytester.runpytest_subprocess(*ARGS, *args, "--gpuperf-json=results.json", "--gpuperf-base-tests=base")
    assert worktrees(root) == 1
    results = json.loads((root / "results.json").read_text())["results"]
    return result, {r["key"].split("::")[1]: r["comparisons"][0] for r in results}


def slots(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("slot-*"))


def test_two_suspected_tests_are_confirmed_by_the_same_warm_workers_and_no_pair_beyond_the_deciding_look(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # both tests four times slower in the head's own process only: two suspicions, both cleared by fresh pairs
    monkeypatch.setenv("SLOTS_DIR", str(pytester.path))
    result, verdicts = run(pytester, HEAD.format(slot_work="20000", own="80000"), "--gpuperf-confirm-pairs=6")
    assert result.ret == 0, result.stdout.str()
    for test in ("test_spin", "test_spin_again"):
        assert verdicts[test]["verdict"] == "unchanged", verdicts[test]
        # decided at the first look: three of at most six pairs
        assert "3 fresh process pairs" in verdicts[test]["evidence"], verdicts[test]
        assert "3 fresh pairs ruled it out" in verdicts[test]["note"], verdicts[test]
        # the figures shown are the fresh pairs' too, not the first pair's four-to-one, and agree with the change
        shown = verdicts[test]
        assert shown["current"] / shown["baseline"] == pytest.approx(1 + shown["change"], rel=1e-9), shown
        assert 0.7 < shown["current"] / shown["baseline"] < 1.4, shown
    # three head workers for six readings: the second suspicion reused the first one's processes
    assert slots(pytester.path) == ["slot-0", "slot-1", "slot-2"]


# The head's own process runs both tests four times slower than the base: both are suspected. The fresh
# head workers run the base's speed, and the one holding slot 0 dies while it measures the first test.
CRASH_IN_THE_FIRST_TEST = """
import os


def _slot():
    here = os.environ["SLOTS_DIR"]
    n = 0
    while True:
        try:
            os.close(os.open(os.path.join(here, f"slot-{n}"), os.O_CREAT | os.O_EXCL))
            return n
        except FileExistsError:
            n += 1


SLOT = _slot() if "GPUPERF_WORKER_FD" in os.environ else None
WORK = 80000 if SLOT is None else 20000


def spin():
    total = 0
    for i in range(WORK):
        total += i * i
    return total


def spin_or_die():
    if SLOT == 0:
        os._exit(3)
    return spin()


def test_spin(gpu_bench):
    gpu_bench(spin_or_die)


def test_spin_again(gpu_bench):
    gpu_bench(spin)
"""


def test_a_pair_that_broke_is_started_again_for_the_next_suspected_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLOTS_DIR", str(pytester.path))
    result, verdicts = run(pytester, CRASH_IN_THE_FIRST_TEST, "--gpuperf-confirm-pairs=3")
    first, second = verdicts["test_spin"], verdicts["test_spin_again"]
    # the first test keeps its suspicion: two pairs are too few to clear it
    assert first["verdict"] == "regression", first
    assert "(2 measured: pair " in first["note"] and "exited with code 3" in first["note"], first
    assert result.ret == 1, result.stdout.str()
    # the second test is measured by three pairs again: the broken pair's processes were replaced
    assert second["verdict"] == "unchanged", second
    assert "3 fresh process pairs" in second["evidence"], second
    assert slots(pytester.path) == ["slot-0", "slot-1", "slot-2", "slot-3"]


# A model whose depth the head quadruples, measured by compare_autocast: two measurements of one test
# (amp.fp32 and amp.bf16, bf16 autocast on the CPU), both suspected, each confirmed in the same pairs.
AMP_MODEL = """
import torch

DEPTH = {depth}


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(64, 64) for _ in range(DEPTH)))
"""

AMP_TEST = """
import torch
from model import make_model
from pytest_gpuperf.paths.amp import compare_autocast

INPUTS = (torch.randn(32, 64),)


def test_forward(gpu_bench):
    compare_autocast(gpu_bench, make_model(), INPUTS, dtypes=("bf16",), speedup_tolerance=None)
"""


def test_every_measurement_of_a_test_with_several_is_confirmed_in_fresh_pairs(pytester: pytest.Pytester) -> None:
    root = pytester.path
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    pytester.makeconftest("import torch\ntorch.set_num_threads(1)\n")
    pytester.makepyfile(model=AMP_MODEL.format(depth=4), test_amp=AMP_TEST)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    pytester.makepyfile(model=AMP_MODEL.format(depth=16))
    git(root, "commit", "-qam", "head: four times deeper")
    result = pytester.runpytest_subprocess(*ARGS, "--gpuperf-confirm-pairs=3", "--gpuperf-json=results.json")
    assert worktrees(root) == 1
    results = json.loads((root / "results.json").read_text())["results"]
    times = {r["key"].rsplit("::", 1)[1]: r["comparisons"][0] for r in results}
    assert set(times) == {"amp.fp32", "amp.bf16"}, times
    for name, time_result in times.items():
        assert time_result["metric"] == "time.p50", time_result
        # each measurement read by the fresh pairs, none "not measured" at either checkout
        assert "not measured" not in time_result["note"], (name, time_result)
        assert "fresh process pairs (ratios" in time_result["evidence"], (name, time_result)
    assert result.ret == 1, result.stdout.str()
