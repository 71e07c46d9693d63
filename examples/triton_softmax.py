"""A row-wise fused softmax in Triton (one program per row; the row stays in registers).

Imported only by test_kernels.py when Triton and a GPU are present.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    _softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=block, num_warps=8 if block >= 2048 else 4)
    return out
