"""Limit an Nsight Systems / Nsight Compute capture to the measured rounds.

``nsys profile --capture-range=cudaProfilerApi`` or ``ncu --profile-from-start off`` records only
between ``cudaProfilerStart/Stop``, so warm-up, imports and baseline I/O stay out of the report.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

CPU_NOTE = "--gpuperf-nsight has no effect on the CPU: cudaProfilerStart/Stop need a CUDA device"

_cpu_noted = False


@dataclass
class CaptureState:
    """``active`` when ``capture_range`` bracketed the block; ``note`` once per process where it cannot work."""

    active: bool
    note: str | None = None


@contextlib.contextmanager
def capture_range(enabled: bool, device: torch.device) -> Iterator[CaptureState]:
    """Bracket the block with cudaProfilerStart/Stop when ``enabled`` and ``device`` is CUDA."""
    global _cpu_noted
    if not enabled:
        yield CaptureState(active=False)
        return
    if device.type != "cuda":
        note = None if _cpu_noted else CPU_NOTE
        _cpu_noted = True
        yield CaptureState(active=False, note=note)
        return
    import torch

    # The profiler API works on the current context: make it the measured device's.
    with torch.cuda.device(device):
        torch.cuda.profiler.start()
        try:
            yield CaptureState(active=True)
        finally:
            # Stop after the queued work so kernels still in flight are inside the range.
            torch.cuda.synchronize(device)
            torch.cuda.profiler.stop()
