"""GPU building blocks: device parsing, memory peaks, L2 flushing, CUDA graphs, NVML health.

Each submodule imports torch (and pynvml) inside its functions, so importing
this package costs nothing on a machine without them.
"""

from __future__ import annotations

from pytest_gpuperf.gpu.device import cuda_synchronize, resolve_device

__all__ = ["cuda_synchronize", "resolve_device"]
