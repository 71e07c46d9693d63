"""Automatic mixed precision: fp32 against autocast bf16 (and fp16 with GradScaler on GPUs)."""

from __future__ import annotations

import torch
from workloads import PlantedAmpBlock, Sizes, block_flops, fit_target

from pytest_gpuperf.paths import Bench
from pytest_gpuperf.paths.amp import compare_autocast


def test_amp_training_step(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    block = PlantedAmpBlock(sizes.d_model, sizes.heads).to(device)
    x = torch.randn(sizes.tokens_batch, sizes.seq_len, sizes.d_model, device=device)
    report = compare_autocast(
        gpu_bench,
        block,
        (x,),
        loss_fn=fit_target(torch.randn_like(x)),
        optimizer=lambda params: torch.optim.AdamW(params, lr=1e-4),
        dtypes=("bf16", "fp16"),
        # tensor cores make autocast pay off on GPUs; CPUs get no bound, only the baseline
        min_speedup=1.3 if device.type == "cuda" else None,
        speedup_tolerance=sizes.ratio_tolerance,
        items=sizes.tokens_batch * sizes.seq_len,
        flops=3 * block_flops(sizes),
    )
    assert "bf16" in report.results or "bf16" in report.skipped
    for dtype, reason in report.skipped.items():
        print(f"amp.{dtype} skipped: {reason}")
