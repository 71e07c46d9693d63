"""Baseline mode on a busy runner, through real pytest sessions: a CPU hog shares the measuring core.

The session and a process spinning a full core are pinned to the same core, so the scheduler shares
it between them whatever else the machine does: about half of every measurement is run-queue wait,
which the verdict takes out (model/scheduling.py). No assertion reads a timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.perf_project import make_project

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists("/proc/thread-self/schedstat"), reason="Linux scheduler accounting"),
]

# no --gpuperf-busy-policy=judge: the gate as a user runs it, busy-runner rule and all
ARGS = ["--gpuperf-min-time=0.1", "--gpuperf-max-time=0.6", "-p", "no:cacheprovider", "--gpuperf-json=out.json"]


@contextmanager
def hog_on_one_core(busy: bool = True) -> Iterator[None]:
    """This process (so the sessions it starts) on one core, with a process spinning on it when ``busy``."""
    before = os.sched_getaffinity(0)
    core = min(before)
    os.sched_setaffinity(0, {core})
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    if proc is not None:
        os.sched_setaffinity(proc.pid, {core})
        time.sleep(0.2)
    try:
        yield
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        os.sched_setaffinity(0, before)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # calls of about 4 ms, longer than the scheduler's slice: a hog on the core preempts every one of them
    # (shorter calls fit between its slices, and their median never waits)
    monkeypatch.setenv("DEMO_REPS", "40")
    return make_project(pytester)


def time_comparison(project: pytest.Pytester) -> dict[str, object]:
    (result,) = [r for r in json.loads((project.path / "out.json").read_text())["results"]
                 if r["measurement"]["test_id"].endswith("test_matmul")]  # fmt: skip
    return next(c for c in result["comparisons"] if c["kind"] == "time")


def test_a_hog_alone_is_never_a_regression(project: pytest.Pytester) -> None:
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *ARGS).assert_outcomes(passed=2)
    with hog_on_one_core():
        gate = project.runpytest_subprocess("--gpuperf", *ARGS)
    gate.assert_outcomes(passed=2)
    c = time_comparison(project)
    assert c["verdict"] != "regression"
    correction = c["correction"]
    assert isinstance(correction, dict) and correction["wait_share"] > 0.2, c  # the hog took the core that long


def test_a_plant_under_a_hog_is_caught(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *ARGS).assert_outcomes(passed=2)
    monkeypatch.setenv("DEMO_REPS", "80")  # twice the work
    with hog_on_one_core():
        gate = project.runpytest_subprocess("--gpuperf", *ARGS)
    assert gate.ret == 1, gate.stdout.str()
    gate.stdout.fnmatch_lines(["*test_matmul*regression*"])
    assert time_comparison(project)["verdict"] == "regression"


def test_a_baseline_written_under_a_hog_gates_a_plant_on_a_quiet_core(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with hog_on_one_core():
        project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *ARGS).assert_outcomes(passed=2)
    (path,) = (project.path / "baselines").rglob("*.json")
    (entry,) = json.loads(path.read_text())["entries"].values()
    assert entry["correction"]["wait_share"] > 0.2  # written busy: its times less their wait are kept
    monkeypatch.setenv("DEMO_REPS", "80")
    with hog_on_one_core(busy=False):
        gate = project.runpytest_subprocess("--gpuperf", *ARGS)
    assert gate.ret == 1, gate.stdout.str()
    assert time_comparison(project)["verdict"] == "regression"


def test_without_schedstat_cpu_time_stands_in_and_a_hog_is_still_no_regression(project: pytest.Pytester) -> None:
    # a runner without the kernel's per-thread accounting (another OS, a locked-down container)
    project.makeconftest(
        "import torch\ntorch.set_num_threads(1)\nimport pytest_gpuperf.measure.sched as sched\n"
        "sched.TASKS = '/nonexistent'\n"
    )
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *ARGS).assert_outcomes(passed=2)
    with hog_on_one_core():
        gate = project.runpytest_subprocess("--gpuperf", *ARGS)
    gate.assert_outcomes(passed=2)
    (result,) = [r for r in json.loads((project.path / "out.json").read_text())["results"]
                 if r["measurement"]["test_id"].endswith("test_matmul")]  # fmt: skip
    assert result["measurement"]["scheduling"]["source"] == "cpu-time"
    assert time_comparison(project)["verdict"] != "regression"


@contextmanager
def hog_on_every_core() -> Iterator[None]:
    """A process spinning on each core this process may use; the session itself not pinned (as many CPUs as when
    its baseline was written: fewer would slow a multi-threaded call for real)."""
    procs = []
    for core in sorted(os.sched_getaffinity(0)):
        proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        os.sched_setaffinity(proc.pid, {core})
        procs.append(proc)
    time.sleep(0.2)
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_multi_threaded_call_under_hogs_is_never_a_regression(project: pytest.Pytester) -> None:
    # two intra-op threads, each core shared with a hog: the correction's bracket is wide, so it says so
    project.makeconftest("import torch\ntorch.set_num_threads(2)\n")
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *ARGS).assert_outcomes(passed=2)
    with hog_on_every_core():
        gate = project.runpytest_subprocess("--gpuperf", *ARGS)
    gate.assert_outcomes(passed=2)
    assert time_comparison(project)["verdict"] != "regression"
