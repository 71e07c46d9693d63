"""Scheduler accounting around every timed block: the measuring threads' time on a CPU and in a run queue.

Linux accounts each thread's time runnable but waiting for a CPU in
``/proc/<pid>/task/<tid>/schedstat`` (its second field: the run-queue wait, added each time the
thread gets a CPU back, so a thread that is running has all of its waits in it). A
``BlockAccounting`` reads it for every thread of the process just before a block's clock starts
and just after it stops, so the reads stay outside the timed region; each file is opened once and
re-read with ``pread`` (about a microsecond). Beside it: each thread's CPU time from its
per-thread CPU clock (schedstat's own first field is only brought up to date at a switch), and the
caller's involuntary context switches (``getrusage(RUSAGE_THREAD)``): each is a return to a CPU
after other work ran there, which costs the caller time to refill its caches. The task list is
refreshed at each round, so threads that a call starts (torch's intra-op pool) are counted from
the next round on.

Where schedstat cannot be read (another OS, a kernel without it, a locked-down container), CPU
time is the fallback: ``time.thread_time_ns`` for the caller and ``time.process_time_ns`` for the
process; it has no wait, so its off-CPU time stands for it (``model.scheduling``). Reading never
fails a measurement: a thread that ended drops out, an unreadable file falls back.

Hand-written: psutil reads the same files but not per block at this cost.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from dataclasses import dataclass, field

from pytest_gpuperf.model.scheduling import Scheduling, WaitSource

TASKS = "/proc/self/task"
# getrusage of the calling thread where the OS has it (Linux), else of the process
_RUSAGE_CALLER = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


def _wait(fd: int) -> int | None:
    """The run-queue wait (ns) from an open schedstat file; None when its thread ended."""
    try:
        return int(os.pread(fd, 96, 0).split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_clock(tid: int) -> int:
    """The Linux clock id of thread ``tid``'s CPU time: what glibc's pthread_getcpuclockid builds."""
    return ((~tid) << 3) | 6  # CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD


def _cpu(tid: int) -> int | None:
    try:
        return time.clock_gettime_ns(_cpu_clock(tid))
    except OSError:
        return None


def _switches() -> int:
    return resource.getrusage(_RUSAGE_CALLER).ru_nivcsw


def available_cpus() -> int:
    """The CPUs this process may run on."""
    with contextlib.suppress(AttributeError, OSError):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1


# One block's accounting: caller wait, caller CPU, all threads' wait, all threads' CPU, the longest one thread
# waited, the caller's involuntary switches.
Block = tuple[float, float, float, float, float, float]


@dataclass
class BlockAccounting:
    """Reads the scheduler's accounting around each block of a round; ``scheduling()`` gives it per call.

    ``tasks``: the folder of the process's threads (``TASKS`` when made; a test's own); None: CPU time only.
    Use from the measuring thread: the caller is the thread that calls ``before_block``.
    """

    tasks: str | None = field(default_factory=lambda: TASKS)
    cpus: int = field(default_factory=available_cpus)
    source: WaitSource = field(default=WaitSource.SCHEDSTAT, init=False)
    _fds: dict[int, int] = field(default_factory=dict, init=False)
    _caller: int = field(default=0, init=False)
    _start: dict[int, tuple[int, int]] = field(default_factory=dict, init=False)
    _start_cpu: tuple[int, int, int] = field(default=(0, 0, 0), init=False)
    _wall: int = field(default=0, init=False)
    _blocks: list[Block] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.tasks is None:
            self.source = WaitSource.CPU_TIME

    # -- the rounds ------------------------------------------------------------------------

    def begin_round(self) -> None:
        """Open the schedstat file of every thread the process has now (new threads since the last round)."""
        self._caller = threading.get_native_id()
        if self.source is not WaitSource.SCHEDSTAT or self.tasks is None:
            return
        try:
            present = {int(t) for t in os.listdir(self.tasks)}
        except (OSError, ValueError):
            present = set()
        for tid in set(self._fds) - present:
            os.close(self._fds.pop(tid))
        for tid in present - set(self._fds):
            with contextlib.suppress(OSError):
                self._fds[tid] = os.open(f"{self.tasks}/{tid}/schedstat", os.O_RDONLY)
        if self._caller not in self._fds or _wait(self._fds[self._caller]) is None:
            self.close()
            self.source = WaitSource.CPU_TIME  # no schedstat here: CPU time, for the rest of the measurement

    def before_block(self) -> None:
        self._wall = time.perf_counter_ns()
        if self.source is WaitSource.SCHEDSTAT:
            self._start = self._snapshot()
        self._start_cpu = (time.thread_time_ns(), time.process_time_ns(), _switches())

    def after_block(self, block_ns: float) -> None:
        """The block's accounting; ``block_ns`` is its wall time, which the reads around it enclose.

        A thread preempted between the clock's read and the counters' is charged a wait the block
        never saw: whatever the reads enclose beyond the block (``gap``) comes off each thread's
        wait and CPU time, so a block is never charged more than it can have lost.
        """
        caller_cpu = float(time.thread_time_ns() - self._start_cpu[0])
        process_cpu = float(time.process_time_ns() - self._start_cpu[1])
        switches = float(_switches() - self._start_cpu[2])
        if self.source is WaitSource.SCHEDSTAT:
            end = self._snapshot()
            gap = max(float(time.perf_counter_ns() - self._wall) - block_ns, 0.0)
            self._blocks.append(self._deltas(self._start, end, gap, block_ns, switches))
            return
        caller_cpu = min(caller_cpu, block_ns)
        off_cpu = max(block_ns - caller_cpu, 0.0)  # stands for the wait: nothing here tells waiting from sleeping
        self._blocks.append((off_cpu, caller_cpu, off_cpu, process_cpu, off_cpu, switches))

    def _snapshot(self) -> dict[int, tuple[int, int]]:
        """(CPU ns, run-queue wait ns) of each thread whose counters could be read."""
        now = {}
        for tid, fd in self._fds.items():
            wait = _wait(fd)
            cpu = _cpu(tid)
            if wait is not None and cpu is not None:
                now[tid] = (cpu, wait)
        return now

    def _deltas(
        self, start: dict[int, tuple[int, int]], end: dict[int, tuple[int, int]], gap: float, block_ns: float,
        switches: float,
    ) -> Block:  # fmt: skip
        caller_cpu = caller_wait = total_cpu = total_wait = longest = 0.0
        for tid, (cpu1, wait1) in end.items():
            if tid not in start:
                continue
            cpu = min(max(float(cpu1 - start[tid][0]) - gap, 0.0), block_ns)
            wait = min(max(float(wait1 - start[tid][1]) - gap, 0.0), block_ns)
            total_cpu += cpu
            total_wait += wait
            longest = max(longest, wait)
            if tid == self._caller:
                caller_cpu, caller_wait = cpu, wait
        return caller_wait, caller_cpu, total_wait, total_cpu, longest, switches

    # -- what was accounted ----------------------------------------------------------------

    def blocks(self) -> int:
        return len(self._blocks)

    def scheduling(
        self, calls_per_sample: int, launch_ns: tuple[float, ...] = (), *, since: int = 0
    ) -> Scheduling | None:
        """What was accounted from block ``since`` on, per call (``calls_per_sample`` calls a block); None: no block."""
        blocks = self._blocks[since:]
        if not blocks:
            return None
        n = float(calls_per_sample)
        caller_wait, caller_cpu, threads_wait, threads_cpu, longest, switches = (
            tuple(v / n for v in column) for column in zip(*blocks, strict=True)
        )
        return Scheduling(self.source, caller_wait, caller_cpu, threads_wait, threads_cpu, longest, cpus=self.cpus,
                          launch_ns=launch_ns, caller_switches=switches)  # fmt: skip

    def close(self) -> None:
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()

    def __del__(self) -> None:
        self.close()
