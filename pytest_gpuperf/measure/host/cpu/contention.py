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
from pytest_gpuperf.model.busy import BUSY_PRESSURE, contended, describe

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

    def recent_pressure(self) -> float | None:
        """PSI's own average of the last 10 s ("some avg10"), as a share of the time (None: no PSI)."""
        avg10 = self._pressure_field("avg10")
        return None if avg10 is None else avg10 / 100.0

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


# QuietWait: a window this long must read quiet; one wait lasts at most QUIET_WAIT_S; a session
# waits in all at most QUIET_FIRST_S plus QUIET_SHARE of the time since its first wait, and never
# more than QUIET_BUDGET_S, so a runner busy all session costs about a tenth more time (writing
# baselines must stay within 3x a gating run).
QUIET_WINDOW_S = 0.25
QUIET_WAIT_S = 5.0
QUIET_FIRST_S = 1.0
QUIET_SHARE = 0.1
QUIET_BUDGET_S = 60.0


@dataclass
class QuietWait:
    """Waits, bounded, for a window in which the kernel's counters read the runner quiet.

    Before a measurement a baseline is written from, and before a busy one is taken again.
    """

    reader: ContentionReader = PROC
    sleep: Callable[[float], None] = time.sleep
    window_s: float = QUIET_WINDOW_S
    max_wait_s: float = QUIET_WAIT_S
    budget_s: float = QUIET_BUDGET_S
    first_s: float = QUIET_FIRST_S
    share: float = QUIET_SHARE
    spent_s: float = 0.0
    started_s: float | None = None  # the reader's clock at the first wait

    def allowance_s(self) -> float:
        """How long this session may have waited by now (``spent_s`` counts against it)."""
        now = self.reader.clock()
        if self.started_s is None:
            self.started_s = now
        return min(self.budget_s, self.first_s + self.share * (now - self.started_s))

    def wait(self) -> str | None:
        """Wait for a quiet window; what the measurement's notes say about it (None: quiet at once, or no signal).

        Where PSI's own 10 s average reads quiet nothing is waited; otherwise windows of
        ``window_s`` decide (they see the contention pass sooner than the average does).
        """
        recent = self.reader.recent_pressure()
        if recent is not None and recent < BUSY_PRESSURE:
            return None
        allowed = self.allowance_s()
        if self.spent_s >= allowed:  # spent: not even one window more, the measurement says it was busy
            if recent is None:
                return None
            return (f"the runner was busy (CPU pressure {recent:.0%} over the last 10 s) and this session's time "
                    "for waiting for quiet windows is spent")  # fmt: skip
        waited = 0.0
        while True:
            before = self.reader.sample()
            self.sleep(self.window_s)
            contention = Contention.between(before, self.reader.sample())
            waited += self.window_s
            self.spent_s += self.window_s
            if not contention.known:
                return None  # nothing to wait for on a system without the counters
            if not contention.busy:
                if waited <= self.window_s:
                    return None
                return f"waited {waited:.2g}s for the runner to be quiet ({contention.describe()})"
            if self.spent_s >= allowed:
                return (f"the runner was busy ({contention.describe()}) and this session's time for waiting for "
                        f"quiet windows is spent ({self.spent_s:.2g}s): measured busy")  # fmt: skip
            if waited >= self.max_wait_s:
                return (
                    f"the runner stayed busy through {waited:.2g}s of waiting ({contention.describe()}): measured busy"
                )
