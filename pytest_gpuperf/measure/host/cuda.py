"""The CUDA host guard: NVML health (throttling, clocks); kernel times do not follow host load."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from pytest_gpuperf.verdict.rulesets import GuardRules

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.gpu.nvml import HealthMonitor
    from pytest_gpuperf.modes import ModePlan


class CudaHostGuard:
    name = "cuda"
    pin_cpu = None

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def rules(self, plan: ModePlan) -> GuardRules:
        return GuardRules()  # throttling reaches the verdict as the measurement's unstable_reason (rule "health")

    def pinned(self) -> AbstractContextManager[object]:
        return contextlib.nullcontext()

    measures_peak_memory = False

    def peak_memory(self, call: Callable[[], object]) -> int | None:
        return None  # the CUDA caching allocator keeps its own peak (gpu/memory.py)

    def health_monitor(self) -> HealthMonitor | None:
        from pytest_gpuperf.gpu.nvml import HealthMonitor

        return HealthMonitor(self.device.index or 0)

    def reference(self) -> None:
        return None  # kernel times do not follow the host's state

    def busy(self, health: Mapping[str, object]) -> str | None:
        return None  # kernel times do not follow host load; throttling is NVML's (unstable_reason)

    @property
    def busy_ends_write(self) -> bool:
        return False  # never busy
