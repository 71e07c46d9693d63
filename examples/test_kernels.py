"""Custom kernels rated against the device's peak: a torch.library custom op, and a Triton kernel.

``fraction_of_peak`` compares the achieved rate with the datasheet peak of the
GPU (pytest_gpuperf.paths.peaks) or, on CPUs and unlisted GPUs, with a matmul and
a copy measured on the spot; the fraction is gated like a time.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from workloads import Sizes, planted

from pytest_gpuperf.paths import Bench
from pytest_gpuperf.paths.kernels import measure_kernel


@torch.library.custom_op("gpuperf_examples::scaled_residual", mutates_args=())
def scaled_residual(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """``x + alpha * y`` as one registered op: what a fused CUDA/C++ extension would expose."""
    out = torch.add(x, y, alpha=alpha)
    if planted("slow_kernel"):
        for _ in range(8):
            out = torch.add(x, y, alpha=alpha)  # the same result, computed again
    return out


@scaled_residual.register_fake
def _(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.empty_like(x)  # shapes for torch.compile and meta tensors


def test_custom_op_bandwidth(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    x = torch.randn(sizes.vector, device=device)
    y = torch.randn(sizes.vector, device=device)
    torch.testing.assert_close(torch.ops.gpuperf_examples.scaled_residual(x, y, 0.5), x + 0.5 * y)
    measure_kernel(
        gpu_bench,
        torch.ops.gpuperf_examples.scaled_residual,
        (x, y, 0.5),
        name="kernel.custom_op",
        flops=2 * x.numel(),
        bytes=3 * x.numel() * x.element_size(),  # read x and y, write out
        # an elementwise op streams at most of HBM bandwidth on a GPU; a CPU's calibrated peak
        # moves with the machine's load, so there the fraction is recorded, not bounded
        min_fraction=0.5 if device.type == "cuda" else None,
        tolerance=sizes.ratio_tolerance,
    )


def test_triton_softmax(gpu_bench: Bench, device: torch.device) -> None:
    if device.type != "cuda" or importlib.util.find_spec("triton") is None:
        pytest.skip("needs Triton and a CUDA device")
    from triton_softmax import softmax

    x = torch.randn(4096, 4096, device=device)
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=-1))
    measure_kernel(
        gpu_bench,
        softmax,
        (x,),
        name="kernel.triton_softmax",
        flops=5 * x.numel(),
        bytes=2 * x.numel() * x.element_size(),
        min_fraction=0.3,
    )
