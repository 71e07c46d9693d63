"""Clocks that time blocks of calls: the wall clock on a CPU, CUDA events on a GPU.

What runs between blocks (an L2 flush) is outside the timed region. The CUDA
timer records an event pair per block and reads them all after one synchronize.
On an idle GPU a block's start event fires at once and the block would also time
the host's launch of its first call, so each block is queued behind a short GPU
sleep (``torch.cuda._sleep``, a head start), as nvbench does with its blocking
kernel. Launch cost stays in the samples only where the host cannot keep up.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

# Long enough that the clock's resolution and cost stay far below 0.1% of a sample.
CPU_MIN_SAMPLE_NS = 200_000
# CUDA events resolve about 0.5 us; 1 ms blocks keep that and the head start small, so
# the GPU stays busy more than 90% of the time, as under a real workload.
CUDA_MIN_SAMPLE_NS = 1_000_000
# The head start: the host time to open a block seen last round, times this margin, plus
# a slack; bounded so a slow first call (compilation, autotuning) cannot make every block wait.
HEAD_START_MARGIN = 2.0
HEAD_START_SLACK_NS = 10_000
HEAD_START_INITIAL_NS = 100_000
HEAD_START_MAX_NS = 2_000_000
_SLEEP_CALIBRATION_CYCLES = 1_000_000


class BlockObserver(Protocol):
    """Reads something of the host around each timed block, outside its timed region (sched.BlockAccounting)."""

    def before_block(self) -> None: ...

    def after_block(self, block_ns: float) -> None:
        """``block_ns``: the host's time between the block's clock reads (its wall time; on CUDA, its launches)."""


class BlockObservers:
    """Several observers around each block: the first one's reads enclose the others' (it is called first before
    the block and last after it), so an observer whose reads take time goes first, outside what the next one sees."""

    def __init__(self, *observers: BlockObserver) -> None:
        self.observers = observers

    def before_block(self) -> None:
        for observer in self.observers:
            observer.before_block()

    def after_block(self, block_ns: float) -> None:
        for observer in reversed(self.observers):
            observer.after_block(block_ns)


class Timer(Protocol):
    name: str
    min_sample_ns: int

    def time_blocks(
        self,
        call: Callable[[], object],
        calls: int,
        samples: int,
        between: Callable[[], None] | None = None,
        deadline_ns: float | None = None,
        observer: BlockObserver | None = None,
    ) -> list[float]:
        """Total nanoseconds of each of up to ``samples`` blocks of ``calls`` calls.

        A host-side timer may stop early at ``deadline_ns`` (perf_counter_ns). ``observer`` is
        called just before each block's clock starts and just after it stops (on CUDA, around the
        host's launches of the block).
        """

    def synchronize(self) -> None: ...

    def host_block_ns(self) -> list[float]:
        """The host's time to run each block of the last ``time_blocks`` (launches, no sync).

        Empty where the samples are the host's time already (the wall clock).
        """


class WallTimer:
    """``time.perf_counter_ns`` around blocks of calls; for CPU work."""

    name = "perf_counter"
    min_sample_ns = CPU_MIN_SAMPLE_NS

    def time_blocks(
        self,
        call: Callable[[], object],
        calls: int,
        samples: int,
        between: Callable[[], None] | None = None,
        deadline_ns: float | None = None,
        observer: BlockObserver | None = None,
    ) -> list[float]:
        clock = time.perf_counter_ns
        totals: list[float] = []
        for _ in range(samples):
            if between is not None:
                between()
            if observer is not None:
                observer.before_block()
            start = clock()
            for _ in range(calls):
                call()
            end = clock()
            if observer is not None:
                observer.after_block(float(end - start))
            totals.append(float(end - start))
            if deadline_ns is not None and end >= deadline_ns:
                break
        return totals

    def synchronize(self) -> None:
        return None

    def host_block_ns(self) -> list[float]:
        return []


class CudaEventTimer:
    """CUDA events recorded on the current stream of ``device``, read after a synchronize."""

    name = "cuda_event"
    min_sample_ns = CUDA_MIN_SAMPLE_NS

    def __init__(self, device: torch.device, *, head_start: bool = True) -> None:
        import torch

        self._torch = torch
        self._device = device
        # torch.cuda._sleep spins one GPU thread for a number of clock cycles: private but
        # long-standing (torch's own CUDA tests use it). Without it, no head start.
        self._sleep: Callable[[int], None] | None = getattr(torch.cuda, "_sleep", None) if head_start else None
        self._ns_per_cycle: float | None = None
        self.open_ns = float(HEAD_START_INITIAL_NS)  # host time to open a block, worst seen last round
        self._host_ns: list[float] = []  # host time of each block of the last round

    def head_start_ns(self) -> float:
        """How long the GPU sleeps before each block's start event (0 without head start)."""
        if self._sleep is None:
            return 0.0
        return min(HEAD_START_MAX_NS, self.open_ns * HEAD_START_MARGIN + HEAD_START_SLACK_NS)

    def _cycles(self, ns: float) -> int:
        """Sleep cycles that last at least ``ns`` at the fastest clock seen in calibration."""
        if self._ns_per_cycle is None:
            torch = self._torch
            assert self._sleep is not None
            best = math.inf
            for _ in range(3):  # the first sleeps may run while clocks ramp up from idle
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                self._sleep(_SLEEP_CALIBRATION_CYCLES)
                end.record()
                end.synchronize()
                best = min(best, start.elapsed_time(end) * 1e6 / _SLEEP_CALIBRATION_CYCLES)
            self._ns_per_cycle = best if math.isfinite(best) and best > 0 else 1.0
        return max(1, int(ns / self._ns_per_cycle))

    def time_blocks(
        self,
        call: Callable[[], object],
        calls: int,
        samples: int,
        between: Callable[[], None] | None = None,
        deadline_ns: float | None = None,
        observer: BlockObserver | None = None,
    ) -> list[float]:
        # The deadline is ignored: the host cannot see device time without a sync,
        # and the sample count was sized from the device time measured in warm-up.
        torch = self._torch
        with torch.cuda.device(self._device):
            stream = torch.cuda.current_stream(self._device)
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
            sleep = self._sleep
            cycles = self._cycles(self.head_start_ns()) if sleep is not None else 0
            clock = time.perf_counter_ns
            worst_open = 0
            host: list[float] = []
            # Nothing queued before the round may leak into its first sample.
            stream.synchronize()
            for start, end in zip(starts, ends, strict=True):
                if between is not None:
                    between()
                if sleep is not None:
                    sleep(cycles)  # outside the timed region: the head start
                if observer is not None:
                    observer.before_block()  # the host thread's waits while it launches the block
                t0 = clock()
                start.record(stream)
                call()
                worst_open = max(worst_open, clock() - t0)
                for _ in range(calls - 1):
                    call()
                host.append(float(clock() - t0))  # launching the block, before its end event
                end.record(stream)
                if observer is not None:
                    observer.after_block(host[-1])
            self.open_ns = float(worst_open)
            self._host_ns = host
            # The user's function may have moved work to another stream; a
            # device-wide sync makes sure nothing is still running when we read.
            torch.cuda.synchronize(self._device)
            return [start.elapsed_time(end) * 1e6 for start, end in zip(starts, ends, strict=True)]

    def synchronize(self) -> None:
        self._torch.cuda.synchronize(self._device)

    def host_block_ns(self) -> list[float]:
        return list(self._host_ns)


def timer_for(device: torch.device, *, head_start: bool = True) -> Timer:
    """CUDA events for a CUDA device, the wall clock otherwise; ``head_start`` only matters on CUDA."""
    if device.type == "cuda":
        return CudaEventTimer(device, head_start=head_start)
    return WallTimer()
