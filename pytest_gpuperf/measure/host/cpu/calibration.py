"""A fixed CPU workload measured interleaved with a test's rounds (``--gpuperf-calibrate=on``).

It feels the same drift of the machine's speed as the test, and dividing by it
(host/cpu/rules.py) removes it. Opt-in: its own per-process offset can widen the
spread of unchanged code's change instead of narrowing it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pytest_gpuperf.measure.timers import Timer, timer_for

if TYPE_CHECKING:
    import torch

# A small matmul plus elementwise work: compute- and memory-bound parts, like
# the tests it calibrates. A fixed size: its cost must never change between runs.
SIZE = 96
SAMPLES_PER_STEP = 10
RESULT_QUANTILE = 0.10
_WARMUP_CALLS = 20
_SEED = 1234


class CalibrationWorkload:
    """The fixed workload on one device, timed in short steps between a test's rounds."""

    def __init__(self, device: torch.device, *, samples_per_step: int = SAMPLES_PER_STEP) -> None:
        import torch

        self.device = device
        self.samples_per_step = samples_per_step
        gen = torch.Generator().manual_seed(_SEED)
        self._a = torch.randn(SIZE, SIZE, generator=gen).to(device)
        self._b = torch.randn(SIZE, SIZE, generator=gen).to(device)
        self._timer: Timer = timer_for(device)
        self.samples_ns: list[float] = []
        self.calls_per_sample = self._size_blocks()

    def _call(self) -> object:
        return (self._a @ self._b).relu_().add_(1.0).sum()

    def _size_blocks(self) -> int:
        # the first block pays for allocation and thread-pool start; size from the second
        blocks = self._timer.time_blocks(self._call, _WARMUP_CALLS, 2)
        warm = blocks[-1] / _WARMUP_CALLS
        return max(1, int(self._timer.min_sample_ns // max(warm, 1.0)) + 1)

    def step(self) -> None:
        """Time a few samples of the workload (about a millisecond on a CPU)."""
        totals = self._timer.time_blocks(self._call, self.calls_per_sample, self.samples_per_step)
        self.samples_ns.extend(t / self.calls_per_sample for t in totals)

    def result_ns(self) -> float | None:
        """The workload's uncontended per-call time: a low quantile of all samples (None before any).

        Not the median, which moves by tens of percent with the momentary load.
        """
        if not self.samples_ns:
            return None
        return float(np.percentile(self.samples_ns, RESULT_QUANTILE * 100))
