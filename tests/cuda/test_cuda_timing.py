"""CUDA event timing agrees with the profiler's kernel time; profiling works on a GPU."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch

from pytest_gpuperf.profiling.nsight import capture_range
from pytest_gpuperf.profiling.torch_profile import profile_calls
from pytest_gpuperf.timers import timer_for

pytestmark = pytest.mark.cuda


def kernel_time_per_call_ms(fn: object, calls: int) -> float:
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()  # type: ignore[operator]
        torch.cuda.synchronize()
    cuda = torch.autograd.DeviceType.CUDA
    total_us = sum(e.self_device_time_total for e in prof.key_averages() if e.device_type == cuda)
    return total_us / 1e3 / calls


def test_event_timer_agrees_with_profiler_kernel_time(device: torch.device) -> None:
    a = torch.randn(4096, 4096, device=device, dtype=torch.float16)

    def call() -> object:
        return a @ a

    for _ in range(5):
        call()
    timer = timer_for(device)
    event_ms = statistics.median(timer.time_blocks(call, 1, 30)) / 1e6
    kernel_ms = kernel_time_per_call_ms(call, 10)
    # Events also see launch gaps between kernels, so they may read a little high, never low.
    assert 0.9 * kernel_ms <= event_ms <= 1.5 * kernel_ms, (event_ms, kernel_ms)


def test_profile_calls_ranks_device_time(device: torch.device, tmp_path: Path) -> None:
    a = torch.randn(1024, 1024, device=device)
    summary = profile_calls(torch.mm, (a, a), {}, out_dir=tmp_path, label="cuda::mm", device=device)
    assert summary.activities == ("cpu", "cuda")
    assert Path(summary.trace_path).is_file()
    assert summary.top_ops
    assert summary.top_ops[0][0] == "aten::mm"
    assert sum(share for _, _, share in summary.top_ops) <= 1 + 1e-9


def test_capture_range_brackets_cuda_work(device: torch.device) -> None:
    a = torch.randn(256, device=device)
    with capture_range(True, device) as state:
        (a * 2).sum()
    assert state.active is True
    assert state.note is None
