"""Scheduler accounting around timed blocks (measure/sched.py), read from this kernel for real.

A CPU hog pinned to the same core as the measuring thread makes the scheduler share that core,
so the thread's run-queue wait is certain to grow: no load of the machine's own is assumed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from pytest_gpuperf.measure.sched import BlockAccounting
from pytest_gpuperf.model import WaitSource

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/thread-self/schedstat"), reason="Linux schedstat")


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def timed_block(accounting: BlockAccounting, work: float, sleep: float = 0.0) -> float:
    accounting.before_block()
    start = time.perf_counter_ns()
    spin(work)
    time.sleep(sleep)
    block = float(time.perf_counter_ns() - start)
    accounting.after_block(block)
    return block


@pytest.fixture
def one_core() -> Iterator[int]:
    """This thread on one core, for the duration of the test."""
    before = os.sched_getaffinity(0)
    core = min(before)
    os.sched_setaffinity(0, {core})
    try:
        yield core
    finally:
        os.sched_setaffinity(0, before)


@pytest.fixture
def hog(one_core: int) -> Iterator[None]:
    """A process spinning on this thread's core."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    os.sched_setaffinity(proc.pid, {one_core})
    time.sleep(0.2)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def test_a_busy_block_on_a_free_core_is_on_the_cpu_and_the_caller_is_among_the_threads() -> None:
    accounting = BlockAccounting()
    accounting.begin_round()
    blocks = [timed_block(accounting, 0.02) for _ in range(5)]
    s = accounting.scheduling(1)
    assert s is not None and s.source is WaitSource.SCHEDSTAT and len(s.caller_wait_ns) == 5
    # on CPU for most of the block (the machine's other load may take some), never more than the block
    assert max(s.caller_cpu_ns) <= max(blocks)
    assert s.threads_cpu_ns[0] >= s.caller_cpu_ns[0] and s.longest_wait_ns[0] >= s.caller_wait_ns[0] >= 0
    assert s.cpus >= 1


def test_a_hog_on_the_same_core_shows_as_run_queue_wait(hog: None) -> None:
    accounting = BlockAccounting()
    accounting.begin_round()
    blocks = [timed_block(accounting, 0.05) for _ in range(6)]
    s = accounting.scheduling(1)
    assert s is not None
    waited = sum(s.caller_wait_ns) / sum(blocks)
    assert waited > 0.2, (s.caller_wait_ns, blocks)  # the core was shared: about half the time waiting
    # the kernel's clock and the wall clock tick apart: wait and CPU time fill the block to within a few percent
    assert all(w + c <= b * 1.02 for w, c, b in zip(s.caller_wait_ns, s.caller_cpu_ns, blocks, strict=True))


def test_a_sleeping_block_neither_waits_nor_runs() -> None:
    accounting = BlockAccounting()
    accounting.begin_round()
    block = timed_block(accounting, 0.0, sleep=0.05)
    s = accounting.scheduling(1)
    assert s is not None and s.caller_cpu_ns[0] < 0.2 * block and s.caller_wait_ns[0] < 0.2 * block


def test_what_the_reads_enclose_beyond_the_block_is_never_charged_to_it() -> None:
    accounting = BlockAccounting()
    accounting.begin_round()
    accounting.before_block()
    spin(0.01)
    accounting.after_block(0.0)  # the block itself took no time: everything around it is the gap
    s = accounting.scheduling(1)
    assert s is not None and s.caller_cpu_ns == (0.0,) and s.caller_wait_ns == (0.0,)


def test_threads_started_during_a_round_count_from_the_next_round_on() -> None:
    accounting = BlockAccounting()
    accounting.begin_round()
    stop = threading.Event()
    worker = threading.Thread(target=lambda: [spin(0.001) for _ in iter(stop.is_set, True)])
    worker.start()
    try:
        timed_block(accounting, 0.02)
        accounting.begin_round()
        timed_block(accounting, 0.02)
    finally:
        stop.set()
        worker.join()
    s = accounting.scheduling(1)
    assert s is not None
    first_others = s.threads_cpu_ns[0] - s.caller_cpu_ns[0]
    second_others = s.threads_cpu_ns[1] - s.caller_cpu_ns[1]
    assert first_others == 0.0 and second_others > 0.0


def test_without_schedstat_cpu_time_stands_in_and_says_so() -> None:
    accounting = BlockAccounting(tasks=None)
    accounting.begin_round()
    block = timed_block(accounting, 0.01, sleep=0.02)
    s = accounting.scheduling(1)
    assert s is not None and s.source is WaitSource.CPU_TIME
    assert s.caller_wait_ns[0] >= 0.5 * (block - 0.012e9)  # off-CPU time: the sleep, mostly


def test_a_folder_without_the_callers_schedstat_falls_back_to_cpu_time(tmp_path: object) -> None:
    accounting = BlockAccounting(tasks=str(tmp_path))
    accounting.begin_round()
    timed_block(accounting, 0.005)
    s = accounting.scheduling(1)
    assert s is not None and s.source is WaitSource.CPU_TIME


def test_per_call_values_divide_each_block_by_its_calls() -> None:
    accounting = BlockAccounting()
    accounting.begin_round()
    timed_block(accounting, 0.01)
    whole, per_call = accounting.scheduling(1), accounting.scheduling(4)
    assert whole is not None and per_call is not None
    assert per_call.caller_cpu_ns[0] == pytest.approx(whole.caller_cpu_ns[0] / 4)
    assert accounting.scheduling(1, since=1) is None
