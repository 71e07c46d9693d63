"""Limit an Nsight Systems / Nsight Compute capture to the measured rounds.

``torch.cuda.profiler.start()``/``stop()`` call ``cudaProfilerStart/Stop``;
a profiler launched with ``nsys profile --capture-range=cudaProfilerApi`` or
``ncu --profile-from-start off`` records only between them, so warm-up,
imports and baseline I/O stay out of the report.
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
    """What ``capture_range`` did: ``active`` when it bracketed the block for a CUDA profiler.

    ``note`` is set once per process, the first time a capture was asked for
    on a device where it cannot work; the caller adds it to its notes.
    """

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
