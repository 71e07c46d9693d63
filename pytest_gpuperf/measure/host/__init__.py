"""Host guards: what a measurement needs from the machine it runs on, behind one interface.

A shared CPU runner's guard is ``host.cpu``; on CUDA it is NVML health (``host.cuda``).
The core calls only this interface, and the CUDA path imports none of the CPU guard's modules.

May import: ``measure``'s clocks, ``gpu`` (NVML), ``verdict`` (the rules it adds), the model and the leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from pytest_gpuperf.config import BusyPolicy

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.gpu.device_state import DeviceSampler
    from pytest_gpuperf.modes import ModePlan
    from pytest_gpuperf.verdict.rulesets import GuardRules


class Interleaved(Protocol):
    """Work measured between a test's rounds in the same process (the CPU guard's machine reference)."""

    def step(self) -> None: ...

    def result(self) -> Mapping[str, float]:
        """Per kind of work, its time per call over the steps (empty before any)."""


class HealthMonitor(Protocol):
    """Watches the device while a measurement runs (NVML on CUDA)."""

    def start(self) -> None: ...

    def stop(self) -> Any: ...  # gpu/nvml.py's HealthReport: unstable_reason, notes, data


class HostGuard(Protocol):
    """The host-specific part of measuring and judging."""

    name: str

    def rules(self, plan: ModePlan) -> GuardRules:
        """The verdict rules this host adds to ``plan``'s lists."""

    def pinned(self) -> AbstractContextManager[object]:
        """Around warm-up and every round: where the measuring thread runs."""

    @property
    def measures_peak_memory(self) -> bool:
        """Whether ``peak_memory`` calls the measured function once more (the runner budgets for it)."""

    def peak_memory(self, call: Callable[[], object]) -> int | None:
        """Peak memory of one more call where the device keeps no allocator statistics (None: not needed)."""

    def health_monitor(self) -> HealthMonitor | None:
        """A monitor of the device during a measurement (None where there is nothing to watch)."""

    def reference(self) -> Interleaved | None:
        """The machine's reference for one measurement, timed after each of its rounds (None: this host has none)."""

    def busy(self, health: Mapping[str, object]) -> str | None:
        """The evidence that the host was contended while a measurement with this ``health`` data ran, or None."""

    @property
    def busy_ends_write(self) -> bool:
        """Whether a baseline write the host was ``busy`` for takes no readings past the deciding one (readings.py)."""

    @property
    def pin_cpu(self) -> int | None:
        """The core measurements run on (for worker processes to use the same), or None."""


def guard_for(device: torch.device, *, plan: ModePlan, pin_cpu: str = "auto", peak_memory: bool = True,
              busy_policy: BusyPolicy = BusyPolicy.RETAKE) -> HostGuard:  # fmt: skip
    """The guard of ``device``'s host: CUDA's NVML health, or the shared CPU's guards (``busy_policy``: theirs)."""
    if device.type == "cuda":
        from pytest_gpuperf.measure.host.cuda import CudaHostGuard

        return CudaHostGuard(device)
    from pytest_gpuperf.measure.host.cpu import CpuHostGuard

    return CpuHostGuard(device, plan=plan, pin_cpu=pin_cpu, peak_memory=peak_memory, busy_policy=busy_policy)


def device_sampler(guard: HostGuard) -> DeviceSampler | None:
    """The reader of the device's state beside every sample: the CUDA guard's NVML; a CPU has none to read."""
    from pytest_gpuperf.measure.host.cuda import CudaHostGuard

    return guard.device_sampler() if isinstance(guard, CudaHostGuard) else None


def recorded_rules(device_type: str, *, plan: ModePlan, busy_policy: BusyPolicy = BusyPolicy.RETAKE) -> GuardRules:
    """The rules the guard of a ``device_type`` host adds, for measurements judged after their session
    (``gpuperf compare``): the same lists, reading the host state each measurement recorded."""
    if device_type == "cuda":  # the clocks each side recorded; throttling is the measurement's unstable reason
        from pytest_gpuperf.measure.host.cuda import cuda_rules

        return cuda_rules(plan)
    from pytest_gpuperf.measure.host.cpu import guard_rules

    return guard_rules(plan, busy_policy)
