"""A new user's first perf test, the way the README writes it.

DEMO_EXTRA_WORK=0.5 adds 50% more real work to the MLP step, which the demo
uses to show the gate catching a slowdown.
"""

from __future__ import annotations

import os

import torch

EXTRA = float(os.environ.get("DEMO_EXTRA_WORK", "0"))
DEPTH = 4


def make_mlp(width: int, depth: int) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers)


def test_matmul(gpu_bench):
    a = torch.randn(256, 256, device=gpu_bench.device)
    b = torch.randn(256, 256, device=gpu_bench.device)
    result = gpu_bench.measure(torch.mm, args=(a, b), flops=2 * 256**3)
    assert result.stats.count >= 1


def test_mlp_inference(gpu_bench):
    width = 256
    model = make_mlp(width, DEPTH + round(DEPTH * EXTRA)).to(gpu_bench.device).eval()
    x = torch.randn(64, width, device=gpu_bench.device)

    @torch.inference_mode()
    def step() -> torch.Tensor:
        return model(x)

    gpu_bench.measure(step, items=64)
    assert step().shape == (64, width)
