"""Clocks that time blocks of calls: the wall clock on a CPU, CUDA events on a GPU.

A timer times ``samples`` blocks of ``calls`` calls each and returns the total
nanoseconds of each block. Anything done between blocks (an L2 flush) runs
outside the timed region. The CUDA timer records an event pair per block on
the current stream and reads all of them after one synchronize, so the host
never stalls the device inside a round and asynchronous work is never
under-counted: the end event completes only after all work queued before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

# A sample should last this long at least, so the clock's resolution and the
# cost of reading it stay far below 0.1% of the sample.
CPU_MIN_SAMPLE_NS = 200_000
# CUDA events resolve about 0.5 us; 20 us blocks keep that under 3% of a
# sample, and kernels of 20 us and more are timed one call per sample.
CUDA_MIN_SAMPLE_NS = 20_000


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
    ) -> list[float]:
        """Total nanoseconds of each of up to ``samples`` blocks of ``calls`` calls.

        A host-side timer may stop early at ``deadline_ns`` (perf_counter_ns), so a
        machine that slowed down mid-round does not overrun the time budget.
        """
        ...

    def synchronize(self) -> None: ...


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
    ) -> list[float]:
        clock = time.perf_counter_ns
        totals: list[float] = []
        for _ in range(samples):
            if between is not None:
                between()
            start = clock()
            for _ in range(calls):
                call()
            end = clock()
            totals.append(float(end - start))
            if deadline_ns is not None and end >= deadline_ns:
                break
        return totals

    def synchronize(self) -> None:
        return None


class CudaEventTimer:
    """CUDA events recorded on the current stream of ``device``, read after a synchronize."""

    name = "cuda_event"
    min_sample_ns = CUDA_MIN_SAMPLE_NS

    def __init__(self, device: torch.device) -> None:
        import torch

        self._torch = torch
        self._device = device

    def time_blocks(
        self,
        call: Callable[[], object],
        calls: int,
        samples: int,
        between: Callable[[], None] | None = None,
        deadline_ns: float | None = None,
    ) -> list[float]:
        # The deadline is ignored: the host cannot see device time without a sync,
        # and the sample count was sized from the device time measured in warm-up.
        torch = self._torch
        with torch.cuda.device(self._device):
            stream = torch.cuda.current_stream(self._device)
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
            # Nothing queued before the round may leak into its first sample.
            stream.synchronize()
            for start, end in zip(starts, ends, strict=True):
                if between is not None:
                    between()
                start.record(stream)
                for _ in range(calls):
                    call()
                end.record(stream)
            # The user's function may have moved work to another stream; a
            # device-wide sync makes sure nothing is still running when we read.
            torch.cuda.synchronize(self._device)
            return [start.elapsed_time(end) * 1e6 for start, end in zip(starts, ends, strict=True)]

    def synchronize(self) -> None:
        self._torch.cuda.synchronize(self._device)


def timer_for(device: torch.device) -> Timer:
    """CUDA events for a CUDA device, the wall clock otherwise."""
    if device.type == "cuda":
        return CudaEventTimer(device)
    return WallTimer()
