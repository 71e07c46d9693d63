"""Distributed data parallel through torch.distributed's launcher: 2 ranks (gloo on CPU, NCCL on GPUs)."""

from __future__ import annotations

import pytest
import torch
from workloads import Sizes

from pytest_gpuperf.paths import Bench
from pytest_gpuperf.paths.ddp import run_ddp


def test_ddp_two_ranks(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    if device.type == "cuda" and torch.cuda.device_count() < 2:
        pytest.skip("NCCL DDP needs two GPUs on this node")
    report = run_ddp(
        gpu_bench,
        "workloads:make_ddp_step",
        nprocs=2,
        steps=sizes.ddp_steps,
        warmup=2,
        items_per_rank=sizes.cnn_batch,
        # 2 ranks on 2 CPU cores share the machine with the launcher: no bound on CPU
        min_scaling_efficiency=0.8 if device.type == "cuda" else None,
        scaling_tolerance=sizes.ratio_tolerance,
        bandwidth_tolerance=sizes.bandwidth_tolerance,
    )
    assert report.measurement is not None and report.measurement.name == "ddp.2ranks"
