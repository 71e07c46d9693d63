"""End to end: ``pytest --gpuperf --gpuperf-compare-ref=REF`` on a real temporary git repository."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

# A loop of WORK steps; ``setup`` defines WORK, ``check`` runs first in each call.
SPIN_WITH_ENVIRONMENT = """
import os

{setup}

def spin():
    {check}
    total = 0
    for i in range(WORK):
        total += i * i
    return total

def test_spin(gpu_bench):
    gpu_bench(spin)
"""
BASE = SPIN_WITH_ENVIRONMENT.format(setup="WORK = {work}", check="pass")

UNCHANGED_TEST = """

def test_steady(gpu_bench):
    gpu_bench(lambda: sum(i * i for i in range(20000)))
"""

NEW_TEST = """

def test_only_in_head(gpu_bench):
    gpu_bench(lambda: sum(range(1000)))
"""

# Tiny budgets keep the test fast; the generous threshold keeps an unchanged
# run from failing on a noisy machine while a 50% slowdown still fails.
ARGS = (
    "--gpuperf", "--gpuperf-compare-ref=HEAD~1", "-p", "no:cacheprovider",
    "--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.6",
    "--gpuperf-threshold=0.25",
)  # fmt: skip


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_repo(
    pytester: pytest.Pytester,
    head_work: int,
    extra: str = "",
    *,
    base_files: Mapping[str, str] | None = None,
    head_files: Mapping[str, str | None] | None = None,
) -> Path:
    """A base commit and a head commit; ``*_files`` are written after test_perf.py, or removed at head (None)."""
    root = pytester.path
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    pytester.makepyfile(test_perf=BASE.format(work=20000))
    write_files(root, base_files or {})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    pytester.makepyfile(test_perf=BASE.format(work=head_work) + extra)
    write_files(root, head_files or {})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "head")
    return root


def write_files(root: Path, files: Mapping[str, str | None]) -> None:
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink()
            if path.parent != root:
                with contextlib.suppress(OSError):  # an empty folder would still be a namespace package
                    path.parent.rmdir()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def worktrees(root: Path) -> int:
    return git(root, "worktree", "list", "--porcelain").count("worktree ")


def test_compare_ref_fails_a_regression_passes_unchanged_and_marks_new(pytester: pytest.Pytester) -> None:
    # four times the work: on a shared VM the same code can run up to ~2x apart in two
    # processes (core placement), so a smaller change would make this test flaky
    root = make_repo(pytester, head_work=80000, extra=UNCHANGED_TEST + NEW_TEST)
    # the code measured lives in the test file: each side runs its own (the head's would measure the head's code)
    result = pytester.runpytest_subprocess(*ARGS, "--gpuperf-confirm-pairs=3", "--gpuperf-json=results.json",
                                           "--gpuperf-base-tests=base")  # fmt: skip
    assert result.ret == 1, result.stdout.str()
    result.assert_outcomes(failed=1, passed=2)
    cpus = os.sched_getaffinity(0)
    if len(cpus) > 1:  # auto: head and base measure on the same core, the last one
        first = json.loads((root / "results.json").read_text())["results"][0]
        notes = [n["text"] for n in first["measurement"]["notes"]]
        assert f"rounds pinned to CPU {max(cpus)}" in notes
    result.stdout.fnmatch_lines([
        "*performance regression in test_perf.py::test_spin::default*",
        "*time.p50:*->*(+*%)*",
        "*evidence: ratio *sequential interval*3 fresh process pairs (ratios *); first pair *",
        "*ref base commit:*",
    ])  # fmt: skip
    result.stdout.fnmatch_lines(["test_perf.py::test_only_in_head", "  default * new"], consecutive=True)
    result.stdout.fnmatch_lines(["*FAILED test_perf.py::test_spin *"])
    assert "FAILED test_perf.py::test_steady" not in result.stdout.str()
    assert worktrees(root) == 1


# Slow only in the head's own pytest process: the confirmation workers (which have the
# worker's pipe in their environment) run it at the base's speed. So the first pair
# suspects a regression that fresh process pairs do not confirm, deterministically.
SLOW_ONLY_IN_THE_HEAD_PROCESS = SPIN_WITH_ENVIRONMENT.format(
    setup='WORK = 20000 if "GPUPERF_WORKER_FD" in os.environ else 80000', check="pass"
)


def run_confirming(
    pytester: pytest.Pytester, head_source: str, pairs: int = 3
) -> tuple[pytest.RunResult, dict[str, Any]]:
    """Commit ``head_source`` over a 20000-step base; run with ``pairs`` confirmation pairs; (result, time verdict)."""
    root = make_repo(pytester, head_work=20001)
    pytester.makepyfile(test_perf=head_source)
    git(root, "commit", "-qam", "head")
    result = pytester.runpytest_subprocess(*ARGS, f"--gpuperf-confirm-pairs={pairs}", "--gpuperf-json=results.json")
    assert worktrees(root) == 1
    return result, json.loads((root / "results.json").read_text())["results"][0]["comparisons"][0]


def test_a_regression_of_one_process_pair_is_not_confirmed_by_fresh_pairs(pytester: pytest.Pytester) -> None:
    # at most 6 pairs: the first 3 read no slowdown, within the threshold at the first look, so no other starts
    result, time_result = run_confirming(pytester, SLOW_ONLY_IN_THE_HEAD_PROCESS, pairs=6)
    assert result.ret == 0, result.stdout.str()
    assert time_result["verdict"] == "unchanged"
    assert "not confirmed" in time_result["note"] and "3 fresh pairs ruled it out" in time_result["note"]
    assert "3 fresh process pairs" in time_result["evidence"]
    assert abs(time_result["change"]) < 0.25  # the fresh pairs' estimate, not the first pair's 4x


# Four times the work in the head's own process, half the work in the head's confirmation
# workers: the fresh pairs read the head as faster than the base. The first pair said
# slower, so the fresh pairs' "improvement" is no claim either way: unchanged.
FASTER_IN_FRESH_HEAD_PROCESSES = SPIN_WITH_ENVIRONMENT.format(
    setup='WORK = 10000 if "GPUPERF_WORKER_FD" in os.environ else 80000', check="pass"
)


def test_fresh_pairs_that_read_an_improvement_leave_the_suspected_regression_unchanged(
    pytester: pytest.Pytester,
) -> None:
    result, time_result = run_confirming(pytester, FASTER_IN_FRESH_HEAD_PROCESSES)
    assert result.ret == 0, result.stdout.str()
    assert time_result["verdict"] == "unchanged"
    assert time_result["change"] < -0.25  # what the fresh pairs measured: the head's workers do half the work
    assert "not confirmed" in time_result["note"]


# Four times the work in the head's own process and in the second confirmation head
# worker to start, the base's work in the others. The fresh pairs then read about 1.0,
# 4.0, 1.0 and 1.0: an estimate of about +41% with an interval from below 1 to far above
# the 25% threshold at every look, so the confirmation runs to its budget of four pairs and
# says that it could not resolve the change: not a pass under --gpuperf-strict.
SLOW_IN_THE_SECOND_HEAD_WORKER = SPIN_WITH_ENVIRONMENT.format(
    setup="""
def _slot():
    here = os.environ["SLOTS_DIR"]  # not the file's folder: head workers run from a copy of the checkout
    n = 0
    while True:  # a unique number per head worker, in the order they import this file
        try:
            os.close(os.open(os.path.join(here, f"slot-{n}"), os.O_CREAT | os.O_EXCL))
            return n
        except FileExistsError:
            n += 1

WORK = (80000 if _slot() == 1 else 20000) if "GPUPERF_WORKER_FD" in os.environ else 80000
""",
    check="pass",
)


def test_pairs_that_disagree_run_to_the_budget_and_say_they_could_not_resolve(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLOTS_DIR", str(pytester.path))
    result, time_result = run_confirming(pytester, SLOW_IN_THE_SECOND_HEAD_WORKER, pairs=4)
    assert result.ret == 0, result.stdout.str()  # not resolved is no failure unless strict
    assert time_result["verdict"] == "not resolved"
    assert "4 fresh process pairs" in time_result["evidence"]
    assert "not resolved: 4 fresh process pairs" in time_result["note"]
    assert sorted(p.name for p in pytester.path.glob("slot-*")) == ["slot-0", "slot-1", "slot-2", "slot-3"]
    result.stdout.fnmatch_lines(["*could not be judged: 1 not resolved*", "*--gpuperf-confirm-pairs=*"])
    again = pytester.path / "again"  # the second run's head workers take slots of their own
    again.mkdir()
    monkeypatch.setenv("SLOTS_DIR", str(again))
    strict = pytester.runpytest_subprocess(*ARGS, "--gpuperf-confirm-pairs=4", "--gpuperf-strict")
    assert strict.ret == 1, strict.stdout.str()


# Four times the work everywhere, but the confirmation workers (time-only) crash when
# they measure: the first pair's regression has to stand, saying why it is unconfirmed.
CONFIRMATION_WORKERS_CRASH = SPIN_WITH_ENVIRONMENT.format(
    setup="WORK = 80000", check='if os.environ.get("GPUPERF_WORKER_TIME_ONLY") == "1":\n        os._exit(3)'
)


def test_when_confirmation_cannot_run_the_first_pairs_regression_stands(pytester: pytest.Pytester) -> None:
    result, time_result = run_confirming(pytester, CONFIRMATION_WORKERS_CRASH)
    assert result.ret == 1, result.stdout.str()
    assert time_result["verdict"] == "regression"
    assert "not confirmed in fresh process pairs (0 measured: pair 1:" in time_result["note"]
    assert "exited with code 3" in time_result["note"]


def test_unknown_ref_is_a_clear_error(pytester: pytest.Pytester) -> None:
    make_repo(pytester, head_work=20001)
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-compare-ref=no-such-ref", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # refused before any test runs
    result.stderr.fnmatch_lines(["*no-such-ref*no such commit*"])


def test_worker_crash_is_an_error_not_a_hang(pytester: pytest.Pytester) -> None:
    root = pytester.path
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    pytester.makepyfile(test_perf="import os\n\ndef test_spin(gpu_bench):\n    gpu_bench(lambda: os._exit(3))\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base crashes")
    pytester.makepyfile(test_perf="def test_spin(gpu_bench):\n    gpu_bench(lambda: sum(range(100)))\n")
    git(root, "commit", "-qam", "head")
    result = pytester.runpytest_subprocess(*ARGS, timeout=120)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*worker exited with code 3*"])
    assert worktrees(root) == 1


def test_workers_load_the_plugins_the_head_was_told_to(pytester: pytest.Pytester) -> None:
    # a test that needs a fixture of a local plugin given by -p: without it at the base, the
    # base side would error and the result would say "not measured against HEAD~1"
    pytester.makepyfile(localplug="import pytest\n\n@pytest.fixture\ndef work_size():\n    return 2000\n")
    needs_plugin = "def test_spin(gpu_bench, work_size):\n    gpu_bench(lambda: sum(range(work_size)))\n"
    root = pytester.path
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    pytester.makepyfile(test_perf=needs_plugin)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "commit", "-q", "--allow-empty", "-m", "head")
    result = pytester.runpytest_subprocess(
        *ARGS, "-p", "localplug", "--gpuperf-confirm-pairs=0", "--gpuperf-json=results.json"
    )
    (time_result, *_) = json.loads((root / "results.json").read_text())["results"][0]["comparisons"]
    assert time_result["baseline"] is not None, time_result
    assert "not measured" not in time_result["note"], time_result["note"]
    assert result.ret in (0, 1)  # the verdict itself is not what this test is about
    assert worktrees(root) == 1
