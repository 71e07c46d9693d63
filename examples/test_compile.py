"""torch.compile: compile time apart, steady-state speedup, graph breaks and recompiles gated at zero."""

from __future__ import annotations

import os

import torch
from workloads import Sizes, TransformerBlock, block_flops, planted

from pytest_gpuperf.paths import Bench
from pytest_gpuperf.paths.compile import compare_compile

# inductor everywhere by default; GPUPERF_EXAMPLES_COMPILE_BACKEND=aot_eager trades the CPU
# speedup for a much shorter compile (the graph-break and recompile counts stay real).
BACKEND = os.environ.get("GPUPERF_EXAMPLES_COMPILE_BACKEND", "inductor")


def test_compiled_block(gpu_bench: Bench, device: torch.device, sizes: Sizes) -> None:
    block = TransformerBlock(sizes.d_model, sizes.heads).to(device).eval()
    block.graph_break = planted("graph_break")
    x = torch.randn(sizes.tokens_batch, sizes.seq_len, sizes.d_model, device=device)
    extra = []
    if planted("recompile"):
        extra.append((torch.randn(sizes.tokens_batch, sizes.seq_len // 2, sizes.d_model, device=device),))
    with torch.inference_mode():
        compare_compile(
            gpu_bench,
            block,
            (x,),
            name="compile",
            backend=BACKEND,
            mode="default",  # "max-autotune" searches kernels at compile time: minutes, not seconds
            extra_inputs=extra,
            max_graph_breaks=0,
            max_recompiles=0,
            speedup_tolerance=sizes.ratio_tolerance,
            items=sizes.tokens_batch * sizes.seq_len,
            flops=block_flops(sizes),
        )
