"""Flushing L2 makes a buffer that fits in L2 slower to read again."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import pytest
import torch

from pytest_gpuperf.gpu.l2 import L2Flusher, l2_cache_bytes

pytestmark = pytest.mark.cuda

EventTimes = Callable[..., list[float]]


def test_flusher_buffer_covers_twice_the_l2(device: torch.device) -> None:
    flusher = L2Flusher(device)
    assert flusher.active
    l2 = l2_cache_bytes(device)
    assert l2 is not None and l2 > 0
    assert flusher.nbytes >= 2 * l2


def test_flush_makes_a_small_buffer_read_slower(device: torch.device, event_times: EventTimes) -> None:
    l2 = l2_cache_bytes(device) or 32 * 1024 * 1024
    buf = torch.ones(l2 // 4 // 4, device=device)  # a quarter of L2, float32
    flusher = L2Flusher(device)

    def read() -> object:
        return buf.sum()

    # Keep the GPU busy while each timed pair is queued, in both cases, so the events
    # measure the read itself and never the host's launch latency.
    def busy() -> None:
        torch.cuda._sleep(100_000)

    def busy_and_flush() -> None:
        flusher.flush()
        busy()

    for _ in range(5):
        read()
    hot = statistics.median(event_times(read, 50, before=busy))
    cold = statistics.median(event_times(read, 50, before=busy_and_flush))
    assert cold > 1.05 * hot, (cold, hot)
