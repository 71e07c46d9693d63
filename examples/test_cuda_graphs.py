"""CUDA graphs: a launch-bound step replayed from a graph (skipped on CPU)."""

from __future__ import annotations

import pytest
import torch
from workloads import Sizes

from pytest_gpuperf.paths import Bench


def many_small_ops(x: torch.Tensor) -> torch.Tensor:
    for _ in range(50):  # fifty tiny kernels: launch overhead dominates, which graphs remove
        x = torch.sin(x) * 1.01 + 0.1
    return x


@pytest.mark.usefixtures("cuda_only")
def test_graph_replay_beats_launches(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    x = torch.randn(1024, device=device)
    eager = gpu_bench.measure(many_small_ops, (x,), name="cuda_graphs.eager")
    graphed = gpu_bench.measure(many_small_ops, (x,), name="cuda_graphs.replay", cuda_graph=True)
    gpu_bench.metric(
        "speedup",
        eager.stats.median_ns / graphed.stats.median_ns,
        unit="x",
        minimum=1.5,
        measurement=graphed.name,
        description="eager launches median / CUDA graph replay median",
    )
