"""The device's state beside every sample: clocks, power, temperature, clock-event reasons, energy per call.

On CUDA the runner reads NVML around the blocks of its rounds (``gpu/device_state.py``) and a
measurement carries what it read per sample, aligned with ``samples_ns``. A baseline entry keeps
only the medians (``DeviceSummary``): what a verdict compares, such as the SM clock at each side.

May import: errors, modes, stats and units only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

ENERGY_METRIC = "energy"  # the metric a measurement's energy per call is gated as (joules per call)


class EnergySource(str, enum.Enum):
    """Where a measurement's energy per call came from."""

    COUNTER = "counter"  # NVML's total-energy counter read around every round: the device's own integral
    POWER = "power"  # no counter on this device: power readings integrated over the samples, an estimate

    @property
    def label(self) -> str:
        """How the reports say where the energy came from."""
        return "NVML energy counter" if self is EnergySource.COUNTER else "NVML power readings, an estimate"


@dataclass(frozen=True)
class DeviceSummary:
    """The device's state over a measurement: medians of what was read while it worked (None: not read)."""

    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None


@dataclass(frozen=True)
class DeviceState:
    """What NVML read beside each sample, per sample like ``samples_ns``; a quantity it could not read is ``()``.

    A reading is taken after a block is launched, while the device runs it; where readings would cost more
    than their share of the host's time, a sample without a reading of its own carries the round's last one
    (``readings`` says how many were taken). ``reasons``: NVML's clock-event reason bits (``gpu/nvml.py``).
    ``reading_ns``: the host time one reading took, on average. ``energy_source``: how the energy metric
    was obtained, None where none was asked for or none could be.
    """

    sm_clock_mhz: tuple[float, ...] = ()
    mem_clock_mhz: tuple[float, ...] = ()
    power_w: tuple[float, ...] = ()
    temperature_c: tuple[float, ...] = ()
    reasons: tuple[int, ...] = ()
    readings: int = 0
    reading_ns: float = 0.0
    summary: DeviceSummary = DeviceSummary()
    energy_source: EnergySource | None = None

    def __post_init__(self) -> None:
        lengths = {len(v) for v in (self.sm_clock_mhz, self.mem_clock_mhz, self.power_w, self.temperature_c,
                                    self.reasons) if v}  # fmt: skip
        if len(lengths) > 1:
            raise ValueError(f"device state fields must all have one value per sample, got {sorted(lengths)}")

    @property
    def samples(self) -> int:
        """How many samples the state covers (0: nothing could be read)."""
        return max(len(self.sm_clock_mhz), len(self.mem_clock_mhz), len(self.power_w), len(self.temperature_c),
                   len(self.reasons))  # fmt: skip
