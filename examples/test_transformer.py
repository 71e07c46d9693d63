"""A transformer block built on scaled_dot_product_attention, forward and training step."""

from __future__ import annotations

import torch
from workloads import Sizes, TransformerBlock, block_flops, fit_target, train_step

from pytest_gpuperf.paths import Bench


def test_block_forward(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    block = TransformerBlock(sizes.d_model, sizes.heads).to(device).eval()
    x = torch.randn(sizes.tokens_batch, sizes.seq_len, sizes.d_model, device=device)
    with torch.inference_mode():
        gpu_bench.measure(
            block, (x,), name="transformer.forward", items=sizes.tokens_batch * sizes.seq_len, flops=block_flops(sizes)
        )


def test_block_training_step(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    block = TransformerBlock(sizes.d_model, sizes.heads).to(device).train()
    optimizer = torch.optim.AdamW(block.parameters(), lr=1e-4)
    x = torch.randn(sizes.tokens_batch, sizes.seq_len, sizes.d_model, device=device)
    step = train_step(block, optimizer, fit_target(torch.randn_like(x)), x)
    # backward costs about twice the forward: 3x the forward FLOPs per step
    gpu_bench.measure(
        step, name="transformer.train_step", items=sizes.tokens_batch * sizes.seq_len, flops=3 * block_flops(sizes)
    )
