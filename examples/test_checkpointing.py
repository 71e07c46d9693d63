"""Gradient checkpointing: recompute activations in backward; the memory saving is gated.

Two measures of the saving:

- ``activation_saving``: bytes autograd keeps for backward, counted through
  ``saved_tensors_hooks`` (works the same on CPU and GPU, deterministic);
- ``memory_saving``: the peak memory of the whole step as the plugin measured it
  (CUDA's allocator statistics; on CPU the runner's profiler-based peak, where
  the measurement has one).
"""

from __future__ import annotations

import torch
from workloads import CheckpointedStack, Sizes, fit_target, planted, train_step

from pytest_gpuperf.paths import Bench
from pytest_gpuperf.paths._torch import saved_activation_bytes


def test_checkpointing_saves_activation_memory(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    x = torch.randn(sizes.tokens_batch, sizes.seq_len, sizes.d_model, device=device)
    plain = CheckpointedStack(sizes, checkpointed=False).to(device)
    ckpt = CheckpointedStack(sizes, checkpointed=not planted("no_checkpoint")).to(device)
    ckpt.load_state_dict(plain.state_dict())

    loss = fit_target(torch.randn_like(x))

    _, plain_bytes = saved_activation_bytes(lambda: loss(plain(x)), exclude=list(plain.parameters()))
    _, ckpt_bytes = saved_activation_bytes(lambda: loss(ckpt(x)), exclude=list(ckpt.parameters()))

    opt_plain = torch.optim.SGD(plain.parameters(), lr=1e-3)
    opt_ckpt = torch.optim.SGD(ckpt.parameters(), lr=1e-3)
    off = gpu_bench.measure(train_step(plain, opt_plain, loss, x), name="checkpoint.off")
    on = gpu_bench.measure(train_step(ckpt, opt_ckpt, loss, x), name="checkpoint.on")

    gpu_bench.metric(
        "activation_saving",
        1 - ckpt_bytes / plain_bytes,
        minimum=0.5,
        measurement=on.name,
        description="1 - bytes saved for backward with checkpointing / without",
    )
    if on.peak_allocated_bytes and off.peak_allocated_bytes:
        gpu_bench.metric(
            "memory_saving",
            1 - on.peak_allocated_bytes / off.peak_allocated_bytes,
            measurement=on.name,
            description="1 - peak memory of the step with checkpointing / without",
        )
    gpu_bench.metric(
        "recompute_overhead",
        on.stats.median_ns / off.stats.median_ns,
        unit="x",
        better="lower",
        tolerance=sizes.ratio_tolerance,
        measurement=on.name,
        description="step time with checkpointing / without",
    )
