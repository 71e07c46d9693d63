"""How fast the machine is right now, measured between tests, never while one measures.

A shared CPU runner sometimes runs everything 1.5-2x slower for seconds at a time,
and in a test's own times a slow machine and slow code look alike. A fixed workload
(the calibration workload, on one intra-op thread), measured between tests, tells
them apart for the slow-machine rule (host/cpu/rules.py). Only the part of a slowdown
beyond the probe's own spread on a quiet host counts (``beyond_spread``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pytest_gpuperf.measure.host.cpu.calibration import CalibrationWorkload
from pytest_gpuperf.measure.host.cpu.pinning import pinned

if TYPE_CHECKING:
    import torch

# Between processes on a quiet machine the probe varies by about +-10%; the slow states
# it is for run 1.5-2x slower. 1.25 sits between the two.
SLOW_MACHINE_RATIO = 1.25
SLOW_MACHINE_SENSITIVITY = 2.0  # how steeply code may follow the probe's slowdown (explainable_change)
PROBE_STEPS = 10  # x10 samples of at least a timer minimum each: about 20 ms on the CPU
PROBE_REPEATS = 3  # the median of three: a single reading is now and then caught in a slow moment
RECOVERY_WAIT_S = 6.0  # how long a probe waits for a slow machine to recover before measuring
RECOVERY_STEP_S = 1.0


def probes_speed(device: torch.device) -> bool:
    """Whether a speed probe means anything on ``device`` (CPU only; see the module doc)."""
    return device.type == "cpu"


def measure_speed_probe(device: torch.device, pin_cpu: int | None = None) -> float | None:
    """The calibration workload's fast-end per-call time here and now (ns); None off the CPU."""
    if not probes_speed(device):
        return None
    import torch

    threads = torch.get_num_threads()
    # One intra-op thread: with more, where the pool's threads land moves the reading by tens of percent.
    torch.set_num_threads(1)
    try:
        with pinned(pin_cpu):  # on the core the measurements use, in the head and in its workers alike
            workload = CalibrationWorkload(device)
            readings = []
            for _ in range(PROBE_REPEATS):
                workload.samples_ns.clear()
                for _ in range(PROBE_STEPS):
                    workload.step()
                readings.append(workload.result_ns())
    finally:
        torch.set_num_threads(threads)
    return statistics.median(r for r in readings if r is not None)


def slowdown(current_ns: float | None, reference_ns: float | None) -> float | None:
    """How many times slower the machine is now than at the reference (None when either is unknown)."""
    if current_ns is None or reference_ns is None or reference_ns <= 0:
        return None
    return current_ns / reference_ns


def probe_spread(readings: Sequence[float | None]) -> float | None:
    """The probe's own spread over ``readings``: slowest / fastest (None with fewer than two)."""
    known = [r for r in readings if r is not None and r > 0]
    if len(known) < 2:
        return None
    return max(known) / min(known)


def beyond_spread(ratio: float | None, spread: float | None) -> float | None:
    """The part of a slowdown ``ratio`` beyond the probe's own ``spread`` (1.0 within it; None when unknown).

    A baseline's probe is the fastest of its readings, so a later reading on an equally
    quiet machine may read up to ``spread`` slower.
    """
    if ratio is None:
        return None
    return max(1.0, ratio / max(spread or 1.0, 1.0))


def is_slow(ratio: float | None, spread: float | None = None) -> bool:
    """Whether ``ratio`` is a slow machine: ``SLOW_MACHINE_RATIO`` beyond the probe's own spread."""
    effective = beyond_spread(ratio, spread)
    return effective is not None and effective >= SLOW_MACHINE_RATIO


def explainable_change(ratio: float, threshold: float) -> float:
    """The largest relative change a machine ``ratio`` times slower can explain alone, ``threshold`` included.

    Code can follow a slow phase more steeply than the probe's workload (+52% at a
    probe's x1.24), so a slow machine explains up to its slowdown squared, threshold on top.
    """
    return ratio**SLOW_MACHINE_SENSITIVITY * (1.0 + threshold) - 1.0


class SessionSpeedProbe:
    """The speed probe a session records with its measurements (``take`` measures one).

    Gating needs one reading. Writing baselines probes before every measurement and
    keeps the fastest so far, so one slow moment does not mark the entries it writes
    as written on a slow machine.
    """

    def __init__(self, take: Callable[[], float | None]) -> None:
        self._take = take
        self._taken = False
        self.fastest_ns: float | None = None  # the fastest reading so far (None before any)
        self.readings: list[float] = []  # every reading a measurement went ahead on (probe_spread)

    def once(self) -> float | None:
        """The session's first reading; later calls reuse it."""
        if not self._taken:
            self._keep(self._take())
        return self.fastest_ns

    def settled_fastest(self) -> tuple[float | None, str | None]:
        """A new reading, taken again while slow against the fastest so far; the fastest of all and the wait."""
        reading, waited = settled_probe(self._take, self.fastest_ns)
        return self._keep(reading), waited

    def _keep(self, reading: float | None) -> float | None:
        self._taken = True
        if reading is not None:
            self.readings.append(reading)
        known = [p for p in (reading, self.fastest_ns) if p is not None]
        self.fastest_ns = min(known, default=None)
        return self.fastest_ns


def settled_probe(take: Callable[[], float | None], reference_ns: float | None) -> tuple[float | None, str | None]:
    """A probe by ``take``, taken again while it reads slow against ``reference_ns``, up to RECOVERY_WAIT_S.

    Returns the last reading and the note on the wait (None when it did not wait).
    """
    probe = take()
    waited = 0.0
    while is_slow(slowdown(probe, reference_ns)) and waited < RECOVERY_WAIT_S:
        time.sleep(RECOVERY_STEP_S)
        waited += RECOVERY_STEP_S
        probe = take()
    if not waited:
        return probe, None
    ratio = slowdown(probe, reference_ns)
    return probe, f"waited {waited:g}s for the machine to recover (speed probe x{ratio:.2f} then)"
