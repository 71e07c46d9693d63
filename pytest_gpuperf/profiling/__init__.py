"""Hooks for profilers: NVTX ranges, Nsight capture ranges, short torch.profiler captures."""

from __future__ import annotations
