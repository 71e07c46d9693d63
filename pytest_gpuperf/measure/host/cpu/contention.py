"""What the kernel knows about CPU contention during a measurement: pressure stalls, steal time, the run queue.

Read before and after every measurement: ``/proc/pressure/cpu`` (PSI: the share of
the wall time some runnable task waited for a CPU), ``/proc/stat``'s ``steal`` and
``procs_running``. A counter that cannot be read leaves its figure unknown; it never
fails a run. Hand-written: psutil has no PSI reader.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_gpuperf.measure.host.cpu.pinning import available_cpus
from pytest_gpuperf.model import Note
from pytest_gpuperf.model.busy import contended, describe

# Busy (pytest_gpuperf/model/busy.py, shared with the history): over the wall time some task waited for
# a CPU a tenth of the time, or the hypervisor took a twentieth of it, or (without PSI) more tasks
# were runnable than there are CPUs.


@dataclass(frozen=True)
class Sample:
    """The kernel's counters at one instant (None where one cannot be read)."""

    wall_s: float
    pressure_us: float | None
    steal_ticks: int | None
    total_ticks: int | None
    runnable: int | None


@dataclass(frozen=True)
class ContentionReader:
    """Reads the counters from their files (/proc, or a test's); ``clock`` times a sample (monotonic s)."""

    pressure_path: str = "/proc/pressure/cpu"
    stat_path: str = "/proc/stat"
    clock: Callable[[], float] = time.monotonic

    def sample(self) -> Sample:
        steal, total, runnable = self._stat()
        return Sample(self.clock(), self._pressure_field("total"), steal, total, runnable)

    def _pressure_field(self, name: str) -> float | None:
        with contextlib.suppress(OSError, ValueError, KeyError), open(self.pressure_path, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("some "):
                    fields = dict(part.split("=", 1) for part in line.split()[1:])
                    return float(fields[name])
        return None

    def _stat(self) -> tuple[int | None, int | None, int | None]:
        """(steal ticks, all ticks, runnable tasks) from /proc/stat."""
        steal = total = runnable = None
        with contextlib.suppress(OSError, ValueError), open(self.stat_path, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("cpu "):
                    ticks = [int(x) for x in line.split()[1:]]
                    total = sum(ticks[:8])  # user .. steal; guest time is already inside user
                    steal = ticks[7] if len(ticks) > 7 else None
                elif line.startswith("procs_running "):
                    runnable = int(line.split()[1])
        return steal, total, runnable


PROC = ContentionReader()


def _cpus() -> int:
    return len(available_cpus()) or os.cpu_count() or 1


@dataclass(frozen=True)
class Contention:
    """CPU contention over one interval (None: not known here)."""

    pressure: float | None  # share of the wall time some runnable task waited for a CPU
    steal: float | None  # share of all CPU time the hypervisor gave to other guests
    runnable: int | None  # the most tasks runnable at either end (this one included)
    cpus: int = field(default_factory=_cpus)

    @classmethod
    def between(cls, before: Sample, after: Sample) -> Contention:
        wall_us = (after.wall_s - before.wall_s) * 1e6
        pressure = None
        if before.pressure_us is not None and after.pressure_us is not None and wall_us > 0:
            pressure = min(1.0, max(0.0, (after.pressure_us - before.pressure_us) / wall_us))
        steal = None
        if None not in (before.steal_ticks, after.steal_ticks, before.total_ticks, after.total_ticks):
            assert before.total_ticks is not None and after.total_ticks is not None  # for mypy
            ticks = after.total_ticks - before.total_ticks
            if ticks > 0:
                steal = max(0.0, ((after.steal_ticks or 0) - (before.steal_ticks or 0)) / ticks)
        known = [n for n in (before.runnable, after.runnable) if n is not None]
        return cls(pressure, steal, max(known) if known else None)

    @property
    def known(self) -> bool:
        return self.pressure is not None or self.steal is not None

    @property
    def busy(self) -> bool:
        """Whether the runner was contended while it measured, by any direct signal (``busy.contended``)."""
        return contended(self.pressure, self.steal, self.runnable, self.cpus)

    def describe(self) -> str:
        """``CPU pressure 34% of the time, steal 0.0%, 5 runnable tasks on 2 CPUs``: the evidence."""
        return describe(self.pressure, self.steal, self.runnable, self.cpus)

    def as_data(self) -> dict[str, object]:
        """For the measurement's ``health`` data (and back with ``from_data``)."""
        return {"cpu_pressure": self.pressure, "cpu_steal": self.steal, "cpu_runnable": self.runnable,
                "cpus": self.cpus}  # fmt: skip

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Contention | None:
        """The contention a measurement recorded, or None where it recorded none (another host, older)."""
        if "cpu_pressure" not in data and "cpu_steal" not in data:
            return None
        pressure, steal, runnable = data.get("cpu_pressure"), data.get("cpu_steal"), data.get("cpu_runnable")
        return cls(
            float(pressure) if pressure is not None else None,
            float(steal) if steal is not None else None,
            int(runnable) if runnable is not None else None,
            int(data.get("cpus") or 1),
        )


@dataclass(frozen=True)
class ContentionReport:
    """What the monitor hands the runner (the shape of gpu/nvml.py's HealthReport): evidence, no verdict."""

    unstable_reason: str | None = None
    notes: tuple[Note, ...] = ()
    data: dict[str, object] = field(default_factory=dict)


class ContentionMonitor:
    """The CPU host guard's health monitor: the kernel's contention counters around one measurement."""

    def __init__(self, reader: ContentionReader = PROC) -> None:
        self._reader = reader
        self._before: Sample | None = None

    def start(self) -> None:
        self._before = self._reader.sample()

    def stop(self) -> ContentionReport:
        if self._before is not None:
            contention = Contention.between(self._before, self._reader.sample())
            if contention.known:
                return ContentionReport(data=contention.as_data())  # the rules that need it say it (rules.py)
        return ContentionReport()
