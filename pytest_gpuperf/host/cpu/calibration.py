"""A fixed calibration workload measured interleaved with a test's rounds.

Why: on a CPU runner the whole machine gets faster or slower between runs
(frequency scaling, other jobs, a different VM of the "same" type). A fixed
workload measured in the same process, between the test's rounds, feels the
same drift; dividing by it (compare.py does, when both the baseline and the
current measurement have one) removes that drift.

It is opt-in (``--gpuperf-calibrate=on``): the workload has a per-process
offset of its own, and on this project's 2-core runner normalizing widened the
spread of unchanged code's change (elementwise: 1.2% raw, 6.4% normalized;
docs/statistics.md). On CUDA it is a matmul kernel.

The runner calls :meth:`CalibrationWorkload.step` after each round (the
``Interleaved`` protocol in runner.py) and stores :meth:`result_ns` (the
10th percentile of its samples) in ``Measurement.calibration_ns``.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

import numpy as np

from pytest_gpuperf.timers import Timer, timer_for

if TYPE_CHECKING:
    import torch

# A small matmul plus elementwise work: compute- and memory-bound parts, like
# the tests it calibrates. Fixed sizes: its cost must never change between runs.
CPU_SIZE = 96
CUDA_SIZE = 1024
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
        size = CUDA_SIZE if device.type == "cuda" else CPU_SIZE
        gen = torch.Generator().manual_seed(_SEED)
        self._a = torch.randn(size, size, generator=gen).to(device)
        self._b = torch.randn(size, size, generator=gen).to(device)
        self._timer: Timer = timer_for(device)
        self.samples_ns: list[float] = []
        self.step_medians_ns: list[float] = []
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
        per_call = [t / self.calls_per_sample for t in totals]
        self.samples_ns.extend(per_call)
        self.step_medians_ns.append(statistics.median(per_call))

    def result_ns(self) -> float | None:
        """The workload's uncontended per-call time: a low quantile of all samples (None before any).

        A low quantile, not the median: the calibration should measure the
        machine's speed, and under CPU contention the median of its short
        samples moves by tens of percent with the momentary load while the
        fast end stays put (contention itself is the gate's floor check's job).
        """
        if not self.samples_ns:
            return None
        return float(np.percentile(self.samples_ns, RESULT_QUANTILE * 100))


def calibration_for(device: torch.device) -> CalibrationWorkload:
    """A fresh calibration workload for ``device`` (one per measurement)."""
    return CalibrationWorkload(device)
