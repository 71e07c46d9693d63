"""Memory peaks start over per measurement; an OOM is recognized and cleaned up."""

from __future__ import annotations

import pytest
import torch

from pytest_gpuperf.gpu.l2 import L2Flusher
from pytest_gpuperf.gpu.memory import MemoryTracker, is_oom_error

pytestmark = pytest.mark.cuda

MIB = 1024 * 1024


def test_peaks_reset_per_measurement(device: torch.device) -> None:
    tracker = MemoryTracker(device)
    tracker.reset()
    big = torch.empty(256 * MIB, dtype=torch.uint8, device=device)
    del big
    first = tracker.peak_allocated()
    first_reserved = tracker.peak_reserved()
    assert first is not None and first >= 256 * MIB
    assert first_reserved is not None and first_reserved >= first

    tracker.reset()
    small = torch.empty(1 * MIB, dtype=torch.uint8, device=device)
    second = tracker.peak_allocated()
    del small
    assert second is not None
    assert MIB <= second < first


def test_the_l2_flush_buffer_is_left_out_of_the_peaks(device: torch.device) -> None:
    tracker = MemoryTracker(device)
    tracker.reset()
    torch.empty(8 * MIB, dtype=torch.uint8, device=device)
    without_flusher = tracker.peak_allocated()

    flusher = L2Flusher(device)
    tracker.exclude(flusher.nbytes, flusher.reserved_bytes)
    tracker.reset()
    flusher.flush()
    torch.empty(8 * MIB, dtype=torch.uint8, device=device)
    assert tracker.peak_allocated() == without_flusher
    flusher.close()


def test_oom_is_recognized_reported_and_released(device: torch.device) -> None:
    tracker = MemoryTracker(device)
    total = torch.cuda.get_device_properties(device).total_memory
    with pytest.raises(Exception) as info:
        torch.empty(4 * total, dtype=torch.uint8, device=device)
    assert is_oom_error(info.value)
    report = tracker.oom_report()
    assert "memory summary" in report.lower()
    tracker.release()
    ok = torch.ones(16, device=device)
    assert float(ok.sum()) == 16.0
