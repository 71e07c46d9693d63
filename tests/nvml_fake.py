"""An in-memory ``Nvml`` for tests: NVML cannot exist on a machine without an NVIDIA driver."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_gpuperf.gpu.nvml import ClockDomain, ClockKind, NvmlQueryError


@dataclass
class FakeNvml:
    """An in-memory ``Nvml``; change its attributes to script a measurement.

    ``unsupported`` names methods that raise NvmlQueryError (as NVML does for
    application clocks on consumer GPUs); ``init_error`` makes ``init`` fail
    like a machine without the driver. The energy counter holds ``energy`` mJ; with
    ``energy_clock`` (seconds) it also grows at ``power`` from the fake's creation on,
    as a device drawing that power would.
    """

    gpu_name: str = "NVIDIA Fake GPU"
    gpu_uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    driver: str = "550.54.15"
    cuda_driver: int = 12040
    clocks: dict[tuple[str, str], int] = field(
        default_factory=lambda: {
            ("sm", "current"): 1980,
            ("mem", "current"): 2619,
            ("sm", "max"): 1980,
            ("mem", "max"): 2619,
            ("sm", "applications"): 1755,
            ("mem", "applications"): 2619,
            ("sm", "default_applications"): 1755,
            ("mem", "default_applications"): 2619,
        }
    )
    power_limit: int = 700_000
    power: int = 300_000  # mW
    energy: int = 0  # mJ
    energy_clock: Callable[[], float] | None = None
    temperature: int = 40
    persistence: bool = True
    reasons: int = 0
    unsupported: frozenset[str] = frozenset()
    init_error: str | None = None
    initialized: int = 0
    reason_reads: int = 0
    power_reads: int = 0
    _created: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._created = self.energy_clock() if self.energy_clock is not None else 0.0

    def _check(self, method: str) -> None:
        if method in self.unsupported:
            raise NvmlQueryError("Not Supported", query=method)

    def init(self) -> None:
        if self.init_error is not None:
            raise NvmlQueryError(self.init_error, query="init")
        self.initialized += 1

    def shutdown(self) -> None:
        self.initialized -= 1

    def device_handle(self, cuda_index: int) -> Any:
        self._check("device_handle")
        return cuda_index

    def driver_version(self) -> str:
        self._check("driver_version")
        return self.driver

    def cuda_driver_version(self) -> int:
        self._check("cuda_driver_version")
        return self.cuda_driver

    def name(self, handle: Any) -> str:
        self._check("name")
        return self.gpu_name

    def uuid(self, handle: Any) -> str:
        self._check("uuid")
        return self.gpu_uuid

    def clock_mhz(self, handle: Any, domain: ClockDomain, kind: ClockKind) -> int:
        self._check("clock_mhz")
        self._check(f"clock_mhz:{kind}")
        return self.clocks[(domain, kind)]

    def power_limit_mw(self, handle: Any) -> int:
        self._check("power_limit_mw")
        return self.power_limit

    def temperature_c(self, handle: Any) -> int:
        self._check("temperature_c")
        return self.temperature

    def persistence_mode(self, handle: Any) -> bool:
        self._check("persistence_mode")
        return self.persistence

    def clock_event_reasons(self, handle: Any) -> int:
        self._check("clock_event_reasons")
        self.reason_reads += 1
        return self.reasons

    def power_mw(self, handle: Any) -> int:
        self._check("power_mw")
        self.power_reads += 1
        return self.power

    def total_energy_mj(self, handle: Any) -> int:
        self._check("total_energy_mj")
        if self.energy_clock is None:
            return self.energy
        return self.energy + int(self.power * (self.energy_clock() - self._created))
