"""Tests in this folder need a CUDA GPU; everywhere else they are skipped, not failed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

EventTimes = Callable[..., list[float]]


@pytest.fixture(autouse=True)
def _needs_cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)")


@pytest.fixture
def device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device())


def _event_times_ms(fn: Callable[[], object], reps: int, *, before: Callable[[], object] | None = None) -> list[float]:
    """Per-call CUDA event times of ``fn()``; ``before()`` runs outside each timed pair."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda.synchronize()
    for start, end in zip(starts, ends, strict=True):
        if before is not None:
            before()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]


@pytest.fixture
def event_times() -> EventTimes:
    return _event_times_ms
