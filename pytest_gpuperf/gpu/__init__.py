"""GPU building blocks: device parsing, memory peaks, L2 flushing, CUDA graphs, NVML health (torch loaded lazily)."""

from __future__ import annotations

from pytest_gpuperf.gpu.device import cuda_synchronize, resolve_device

__all__ = ["cuda_synchronize", "resolve_device"]
