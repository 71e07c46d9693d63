"""CUDA event timing agrees with the profiler's kernel time; profiling works on a GPU."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from pytest_gpuperf.measure.timers import CudaEventTimer, timer_for
from pytest_gpuperf.profiling.nsight import capture_range
from pytest_gpuperf.profiling.torch_profile import capture_calls

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


@pytest.mark.filterwarnings("ignore:Warning. Profiler clears events:UserWarning")  # torch 2.11, a bare profile()
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


def test_a_capture_ranks_device_time(device: torch.device, tmp_path: Path) -> None:
    a = torch.randn(1024, 1024, device=device)
    capture = capture_calls(torch.mm, (a, a), {}, trace_path=tmp_path / "mm.json", label="cuda::mm", device=device)
    summary = capture.summary()
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


def test_host_time_to_open_a_block_stays_out_of_the_samples(
    device: torch.device, event_times: Callable[..., list[float]]
) -> None:
    gpu_cycles = 2_000_000  # about 1 ms of GPU time at H100 clocks

    def gpu_work() -> None:
        torch.cuda._sleep(gpu_cycles)

    def slow_to_launch() -> None:
        until = time.perf_counter() + 300e-6  # 300 us of host work before the launch
        while time.perf_counter() < until:
            pass
        gpu_work()

    # The reference: the GPU work alone, queued behind a long sleep so its launch cost is hidden.
    alone_ms = statistics.median(event_times(gpu_work, 20, before=lambda: torch.cuda._sleep(4_000_000)))

    # Every block starts on an idle GPU, as the first block of each round does (the timer
    # synchronizes before a round); in steady state a faster host hides the gap by itself.
    def idle() -> None:
        torch.cuda.synchronize(device)

    with_head_start = CudaEventTimer(device)
    with_head_start.time_blocks(slow_to_launch, 1, 5, idle)  # learns how long the host takes to open a block
    assert with_head_start.head_start_ns() > 300_000
    timed_ms = statistics.median(with_head_start.time_blocks(slow_to_launch, 1, 20, idle)) / 1e6

    without = CudaEventTimer(device, head_start=False)
    leaky_ms = statistics.median(without.time_blocks(slow_to_launch, 1, 20, idle)) / 1e6

    assert timed_ms == pytest.approx(alone_ms, rel=0.03), (timed_ms, alone_ms)
    assert leaky_ms > alone_ms + 0.2, (leaky_ms, alone_ms)  # the 300 us leak the head start removes
