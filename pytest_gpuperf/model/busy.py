"""When a measurement was taken on a busy runner: one rule for the CPU host guard and the history.

A measurement records the kernel's contention counters over its wall time in its ``health``
data (``host/cpu/contention.py``: ``cpu_pressure``, ``cpu_steal``, ``cpu_runnable``, ``cpus``),
and a GPU measurement its clocks' slowdowns as ``unstable_reason`` (``gpu/nvml.py``). The CPU
guard's rules judge a measurement by :func:`contended`; the history marks a run's values busy
by :func:`busy_evidence` (``history/ingest.py``), and the change-point detector leaves busy
runs out of a series a load can move (:func:`load_moves`: timings, never peak memory). Nothing
here reads a counter: it decides from what was recorded.
"""

from __future__ import annotations

from collections.abc import Mapping

# Busy: over the wall time some task waited for a CPU a tenth of the time, or the hypervisor
# took a twentieth of it, or (without PSI) more tasks were runnable than there are CPUs.
BUSY_PRESSURE = 0.10
BUSY_STEAL = 0.05
DURATION_UNITS = frozenset({"s", "ms", "us", "ns"})  # a metric in one of these is a time (a compile's first call)


def load_moves(statistic: str, unit: str) -> bool:
    """Whether a busy runner can move a recorded value: a time (``time.*``) or a metric that is a duration.

    Peak memory is counted exactly whatever the load, and a count, size or ratio a test reports is
    judged whatever the machine's speed (the CPU guard's slow-machine rule reads durations only), so
    a busy run is drawn apart and left out of change points for timings only.
    """
    return statistic.startswith("time.") or (statistic.startswith("metric.") and unit in DURATION_UNITS)


def contended(pressure: float | None, steal: float | None, runnable: int | None, cpus: int) -> bool:
    """Whether counters this high mean the runner was contended while it measured, by any direct signal."""
    return (
        (pressure is not None and pressure >= BUSY_PRESSURE)
        or (steal is not None and steal >= BUSY_STEAL)
        or (pressure is None and runnable is not None and runnable > cpus)
    )


def describe(pressure: float | None, steal: float | None, runnable: int | None, cpus: int) -> str:
    """``CPU pressure 34% of the time, steal 0.0%, 5 runnable tasks on 2 CPUs``: the evidence."""
    parts = []
    if pressure is not None:
        parts.append(f"CPU pressure {pressure:.0%} of the time")
    if steal is not None:
        parts.append(f"steal {steal:.1%}")
    if runnable is not None:
        parts.append(f"{runnable} runnable tasks on {cpus} CPUs")
    return ", ".join(parts) or "no contention signal on this system"


def busy_evidence(health: Mapping[str, object], unstable_reason: str | None, device: str) -> str | None:
    """What says a measurement was taken busy (its contention counters, its GPU's throttling), or None.

    None as well where nothing was recorded (another host, an older results file): unknown is
    not busy.
    """
    if device.startswith("cuda") and unstable_reason:
        return f"GPU {unstable_reason}"
    pressure, steal, runnable = (_number(health.get(k)) for k in ("cpu_pressure", "cpu_steal", "cpu_runnable"))
    if pressure is None and steal is None:
        return None
    cpus = int(_number(health.get("cpus")) or 1)
    count = int(runnable) if runnable is not None else None
    return describe(pressure, steal, count, cpus) if contended(pressure, steal, count, cpus) else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
