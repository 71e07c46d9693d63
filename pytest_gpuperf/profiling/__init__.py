"""Hooks for profilers: NVTX ranges, Nsight capture ranges, short torch.profiler and cProfile captures.

May import: ``gpu``, the model and the leaves; it measures and ranks, ``report`` words it.
"""

from __future__ import annotations
