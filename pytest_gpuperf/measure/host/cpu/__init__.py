"""The shared-CPU host guard: contention counters, the machine's reference, pinning, rules, peak memory.

Everything that exists because the measured code shares the CPU with other processes
lives in this package and reaches the core only through ``CpuHostGuard``.

May import: what ``measure.host`` may; only ``measure.host.guard_for`` imports this package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from pytest_gpuperf.config import BusyPolicy
from pytest_gpuperf.measure.host.cpu.contention import Contention, ContentionMonitor, ContentionReader
from pytest_gpuperf.measure.host.cpu.pinning import pinned, resolve_pin_cpu
from pytest_gpuperf.measure.host.cpu.reference import MachineReference
from pytest_gpuperf.measure.host.cpu.rules import BusyRunner, MachineState
from pytest_gpuperf.verdict.rulesets import GuardRules

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.modes import ModePlan


def guard_rules(plan: ModePlan, busy_policy: BusyPolicy = BusyPolicy.RETAKE) -> GuardRules:
    """The rules a shared CPU adds to ``plan``'s lists. They read only what a measurement records (its
    contention counters, speed probe, samples), so recorded measurements are judged by them too."""
    if plan.interleaved:  # interleaved rounds on one core already cancel the host's drift
        return GuardRules()
    judge = busy_policy is BusyPolicy.JUDGE
    busy = (BusyRunner(),) if plan.busy_runner_rule and not judge else ()
    return GuardRules(time=(*busy, MachineState()), metric=(MachineState(),))


class CpuHostGuard:
    name = "cpu"

    def __init__(
        self,
        device: torch.device,
        *,
        plan: ModePlan,
        pin_cpu: str = "auto",
        peak_memory: bool = True,
        busy_policy: BusyPolicy = BusyPolicy.RETAKE,
        reader: ContentionReader | None = None,
    ) -> None:
        self.device = device
        self.pin_cpu = resolve_pin_cpu(pin_cpu, plan=plan, device_type=device.type)
        self.measures_peak_memory = peak_memory
        self.busy_policy = BusyPolicy(busy_policy)  # a word from a test or a worker's command line too
        self._reader = reader or ContentionReader()

    def rules(self, plan: ModePlan) -> GuardRules:
        return guard_rules(plan, self.busy_policy)

    def pinned(self) -> AbstractContextManager[object]:
        return pinned(self.pin_cpu)

    def peak_memory(self, call: Callable[[], object]) -> int | None:
        if not self.measures_peak_memory:
            return None
        from pytest_gpuperf.measure.host.cpu.memory import peak_tensor_bytes

        return peak_tensor_bytes(call)

    def health_monitor(self) -> ContentionMonitor:
        return ContentionMonitor(self._reader)  # evidence for the busy-runner and fast-end rules

    def reference(self) -> MachineReference:
        return MachineReference()  # numpy and the interpreter: it needs no torch

    def busy(self, health: Mapping[str, object]) -> str | None:
        contention = Contention.from_data(health)
        return contention.describe() if contention is not None and contention.busy else None

    @property
    def busy_ends_write(self) -> bool:
        return self.busy_policy is not BusyPolicy.JUDGE  # judge: the readings decide, as on a quiet host
