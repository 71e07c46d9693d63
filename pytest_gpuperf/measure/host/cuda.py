"""The CUDA host guard: NVML health (throttling, clocks) and the device's state beside every sample; kernel
times do not follow host load."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from pytest_gpuperf.verdict.rulesets import GuardRules

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.gpu.device_state import DeviceSampler
    from pytest_gpuperf.gpu.nvml import HealthMonitor, Nvml
    from pytest_gpuperf.modes import ModePlan


class CudaHostGuard:
    """``nvml``: the NVML to read (None: the driver's, through nvidia-ml-py)."""

    name = "cuda"
    pin_cpu = None

    def __init__(self, device: torch.device, *, nvml: Nvml | None = None) -> None:
        self.device = device
        self.nvml = nvml

    def rules(self, plan: ModePlan) -> GuardRules:
        return GuardRules()  # throttling reaches the verdict as the measurement's unstable_reason (rule "health")

    def pinned(self) -> AbstractContextManager[object]:
        return contextlib.nullcontext()

    measures_peak_memory = False

    def peak_memory(self, call: Callable[[], object]) -> int | None:
        return None  # the CUDA caching allocator keeps its own peak (gpu/memory.py)

    def health_monitor(self) -> HealthMonitor | None:
        from pytest_gpuperf.gpu.nvml import HealthMonitor

        return HealthMonitor(self.device.index or 0, nvml=self.nvml)

    def device_sampler(self) -> DeviceSampler:
        """The reader of the device's clocks, power, temperature and energy beside every sample."""
        from pytest_gpuperf.gpu.device_state import DeviceSampler, StreamMarks

        marks = StreamMarks(self.device) if self.device.type == "cuda" else None  # a CPU device: tests, with a fake
        return DeviceSampler(self.device.index or 0, nvml=self.nvml, marks=marks)

    def reference(self) -> None:
        return None  # kernel times do not follow the host's state

    def busy(self, health: Mapping[str, object]) -> str | None:
        return None  # kernel times do not follow host load; throttling is NVML's (unstable_reason)

    @property
    def busy_ends_write(self) -> bool:
        return False  # never busy
