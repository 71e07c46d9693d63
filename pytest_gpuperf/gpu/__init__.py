"""GPU building blocks: device parsing, memory peaks, L2 flushing, CUDA graphs, NVML health (torch loaded lazily).

May import: config, errors, model, torch_support; its modules stand apart from each other.
"""

from __future__ import annotations

from pytest_gpuperf.gpu.device import cuda_synchronize, resolve_device

__all__ = ["cuda_synchronize", "resolve_device"]
