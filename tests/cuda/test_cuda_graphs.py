"""CUDA graph capture: replays compute the same thing, faster for launch-bound code, and fail clearly."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import pytest
import torch

from pytest_gpuperf.gpu.graphs import GraphCaptureError, capture

pytestmark = pytest.mark.cuda

EventTimes = Callable[..., list[float]]


def mlp(x: torch.Tensor, w: torch.Tensor, *, bias: float) -> torch.Tensor:
    return torch.relu(x @ w + bias)


def test_replay_matches_eager_and_follows_input_updates(device: torch.device) -> None:
    x = torch.randn(64, 128, device=device)
    w = torch.randn(128, 32, device=device)
    replay = capture(mlp, (x, w), {"bias": 0.5}, device)
    out = replay()
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, mlp(x, w, bias=0.5))
    # Inputs are static buffers: new data copied into them is what the next replay reads.
    x.copy_(torch.randn_like(x))
    out2 = replay()
    assert out2 is out  # the same output buffer, overwritten
    torch.testing.assert_close(out2, mlp(x, w, bias=0.5))


def test_replay_beats_eager_for_launch_bound_code(device: torch.device, event_times: EventTimes) -> None:
    t = torch.zeros(1, device=device)

    def many_tiny_kernels(v: torch.Tensor) -> torch.Tensor:
        for _ in range(50):
            v = v + 1
        return v

    replay = capture(many_tiny_kernels, (t,), {}, device)
    torch.testing.assert_close(replay(), torch.full((1,), 50.0, device=device))

    def eager() -> object:
        return many_tiny_kernels(t)

    for _ in range(3):
        eager()
        replay()
    eager_ms = statistics.median(event_times(eager, 30))
    graph_ms = statistics.median(event_times(replay, 30))
    assert graph_ms < eager_ms, (graph_ms, eager_ms)


def test_cpu_tensor_argument_is_refused(device: torch.device) -> None:
    with pytest.raises(GraphCaptureError, match=r"args\[1\] is on cpu"):
        capture(torch.add, (torch.ones(2, device=device), torch.ones(2)), {}, device)


def test_host_sync_inside_is_explained_and_the_device_stays_usable(device: torch.device) -> None:
    x = torch.ones(4, device=device)

    def syncs(v: torch.Tensor) -> float:
        return float((v * 2).sum().item())

    with pytest.raises(GraphCaptureError, match=r"\.item\(\)"):
        capture(syncs, (x,), {}, device)
    torch.cuda.synchronize(device)
    assert float((x + 1).sum()) == 8.0
    # The failed capture must not leave the RNG in capture mode (later random ops would fail).
    assert torch.randn(16, device=device).isfinite().all()
    torch.cuda.manual_seed(0)
    first = torch.rand(4, device=device)
    torch.cuda.manual_seed(0)
    torch.testing.assert_close(torch.rand(4, device=device), first)


def test_errors_of_the_function_itself_propagate(device: torch.device) -> None:
    def broken(v: torch.Tensor) -> torch.Tensor:
        raise ValueError("bug in the measured function")

    with pytest.raises(ValueError, match="bug in the measured function"):
        capture(broken, (torch.ones(1, device=device),), {}, device)
