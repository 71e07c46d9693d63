"""GPU building blocks: device parsing, memory peaks, L2 flushing, CUDA graphs, NVML health, and the device's
state beside every sample (torch loaded lazily).

May import: config, errors, model, torch_support; its modules stand apart from each other, but for the
device's state, which reads NVML.
"""

from __future__ import annotations

from pytest_gpuperf.gpu.device import cuda_synchronize, resolve_device

__all__ = ["cuda_synchronize", "resolve_device"]
