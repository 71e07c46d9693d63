"""A small GPT in nanoGPT's shape, whose attention switches between one fused operator and the manual path.

nanoGPT's ``CausalSelfAttention`` calls ``F.scaled_dot_product_attention`` where it can
(``self.flash``) and otherwise computes attention by hand: a matmul, a scale, ``masked_fill``
with the causal mask, ``softmax``, a second matmul. Switching it replaces one operator inside a
larger model by several, forward and backward: what a differential profile must explain with
the replacement first, not with the many small operators both paths share. The benchmarks use
it too (benchmarks/why_quality.py, through ``_common.shared_test_helper``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class GptShape:
    layers: int = 2
    width: int = 128
    heads: int = 4
    tokens: int = 128
    batch: int = 4
    vocab: int = 512


SMALL = GptShape(layers=1, width=64, heads=2, tokens=64, batch=2, vocab=128)  # a test's: a few ms a call


class CausalSelfAttention(nn.Module):
    def __init__(self, shape: GptShape, flash: bool) -> None:
        super().__init__()
        self.c_attn = nn.Linear(shape.width, 3 * shape.width)
        self.c_proj = nn.Linear(shape.width, shape.width)
        self.heads, self.flash = shape.heads, flash
        mask = torch.tril(torch.ones(shape.tokens, shape.tokens)).view(1, 1, shape.tokens, shape.tokens)
        self.register_buffer("bias", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = (part.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for part in self.c_attn(x).split(c, dim=2))  # fmt: skip
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, shape: GptShape, flash: bool) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(shape.width), nn.LayerNorm(shape.width)
        self.attn = CausalSelfAttention(shape, flash)
        self.fc, self.proj = nn.Linear(shape.width, 4 * shape.width), nn.Linear(4 * shape.width, shape.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class Gpt(nn.Module):
    def __init__(self, shape: GptShape, flash: bool) -> None:
        super().__init__()
        self.wte = nn.Embedding(shape.vocab, shape.width)
        self.blocks = nn.Sequential(*(Block(shape, flash) for _ in range(shape.layers)))
        self.ln_f = nn.LayerNorm(shape.width)
        self.lm_head = nn.Linear(shape.width, shape.vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.ln_f(self.blocks(self.wte(idx))))


def gpt_step(flash: bool, backward: bool, shape: GptShape = SMALL) -> Callable[[], torch.Tensor]:
    """One call of the model (seeded: both switches get the same weights): its forward, or forward and backward."""
    torch.manual_seed(0)
    model = Gpt(shape, flash)
    idx = torch.randint(0, shape.vocab, (shape.batch, shape.tokens))

    def step() -> torch.Tensor:
        with torch.set_grad_enabled(backward):
            logits = model(idx)
            if backward:
                model.zero_grad(set_to_none=True)
                logits.mean().backward()
            return logits

    return step
