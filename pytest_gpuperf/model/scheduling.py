"""What the scheduler accounted for each sample, and the time a call would have taken with the CPUs to itself.

Linux keeps, for every thread, its time on a CPU and its time runnable but waiting in a run
queue (``/proc/<tid>/schedstat``). The runner reads both around every timed block
(``measure/sched.py``) for the calling thread and for the process's threads together, and a
measurement carries them per sample, per call like ``samples_ns``.

Wall time minus the time the call waited for a CPU is the time it would have taken on an
uncontended runner: :func:`correct` computes it, with the bracket the accounting leaves:

* one thread: its wait is exact; the bracket has no width;
* several threads (torch's intra-op pool): a thread that waits delays the others at the next
  join, so the call lost at least the longest single wait and at most the sum of the waits
  (waits that coincide count once, waits in turn add up); the estimate is the middle;
* waits the process caused itself (more runnable threads of its own than CPUs it may use)
  are part of the code's cost and are never removed;
* each return to a CPU after a preemption leaves a residue the counters cannot see: the thread
  finds its caches, TLB and branch predictors refilled by whatever ran meanwhile and works slower
  for a while (a fraction of a millisecond on x86 runners). Its cost per preemption is fitted
  from the measurement's own samples (those preempted more against those preempted less,
  ``_refill_cost``) and taken out too; the bracket allows half of it either way;
* where no wait counter exists (``WaitSource.CPU_TIME``), the wait lies between the off-CPU time
  beyond the least that any sample of the measurement showed (the call's own sleeping) and all
  of it: exact for a CPU-bound call on a runner quiet at times, wide under steady contention;
* on CUDA the samples are the device's: the host's wait slowed a block only where the host
  could not keep the device busy (launch-bound blocks); elsewhere nothing is corrected.

Memory-bandwidth and cache interference from other tenants, and a hypervisor's steal, are not
run-queue waits: the correction leaves them in (the reference workload sees them).

May import: errors, modes, stats and units only.
"""

from __future__ import annotations

import enum
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The residue fitted per preemption is known to this share either way (the bracket's part from it).
RESIDUE_UNCERTAINTY = 0.5
# The fit needs this many samples, preempted unequally, and never takes out more than this share of a sample.
RESIDUE_MIN_SAMPLES = 10
RESIDUE_MAX_SHARE = 0.5
_RESIDUE_PAIRS = 4000  # random pairs of samples whose slopes the fit's median is taken over
# A CUDA block whose host launch time reached this share of its device time kept the device waiting
# for the host: its device time follows the host's delays.
LAUNCH_BOUND_SHARE = 0.9
# A measurement whose samples waited this share of their wall time (median) was contended.
CONTENDED_SHARE = 0.01
# A measurement that waited this share of its time or more shared its CPU with more than one other task (two
# sharing one fairly wait half their time): its time on a CPU was cut into short slices between other work,
# whose caches it inherited, and the correction alone cannot make a change the wall clock does not show
# (verdict/rules.py, the contention rule).
MOSTLY_WAITED = 0.65


class WaitSource(str, enum.Enum):
    """Where a measurement's run-queue wait came from."""

    SCHEDSTAT = "schedstat"  # the kernel's per-thread accounting: exact
    CPU_TIME = "cpu-time"  # no wait counter here: off-CPU time beyond the measurement's least, an estimate


@dataclass(frozen=True)
class Scheduling:
    """The scheduler's accounting for each sample of a measurement, per call (aligned with ``samples_ns``).

    ``caller_*``: the thread that called the measured function; ``threads_*``: all of the process's
    threads summed (the caller included); ``longest_wait_ns``: the most any one thread waited;
    ``cpus``: the CPUs the process may run on. Waits are None-free tuples; under ``CPU_TIME`` the
    wait fields hold the off-CPU time (nothing tells waiting from sleeping there).
    """

    source: WaitSource
    caller_wait_ns: tuple[float, ...]
    caller_cpu_ns: tuple[float, ...]
    threads_wait_ns: tuple[float, ...]
    threads_cpu_ns: tuple[float, ...]
    longest_wait_ns: tuple[float, ...]
    cpus: int = 1
    # where the samples are a device's (CUDA): the host's time per call to launch each sample's calls
    launch_ns: tuple[float, ...] = ()
    # the caller's involuntary context switches (preemptions) per call; () where not counted
    caller_switches: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.caller_wait_ns)
        names = ["caller_cpu_ns", "threads_wait_ns", "threads_cpu_ns", "longest_wait_ns"]
        optional = [f for f in ("launch_ns", "caller_switches") if getattr(self, f)]
        lengths = {len(getattr(self, f)) for f in (*names, *optional)}
        if lengths != {n}:
            raise ValueError(f"scheduling fields must all have one value per sample ({n}), got {sorted(lengths)}")


@dataclass(frozen=True)
class Corrected:
    """A measurement's samples with run-queue wait taken out (``correct``), per call.

    ``samples_ns``: the estimate of each sample; ``low_ns``/``high_ns``: the bracket the accounting
    leaves around it. ``wait_share``: the median share of a sample's wall time lost to waiting.
    """

    samples_ns: tuple[float, ...]
    low_ns: tuple[float, ...]
    high_ns: tuple[float, ...]
    wait_share: float
    source: WaitSource | None  # None: nothing was accounted (the samples are the wall's)

    @property
    def median_ns(self) -> float:
        return statistics.median(self.samples_ns)

    @property
    def uncertainty(self) -> float:
        """The relative half-width of the bracket around the median estimate (0: exact)."""
        mid = self.median_ns
        if mid <= 0:
            return 0.0
        return (statistics.median(self.high_ns) - statistics.median(self.low_ns)) / 2.0 / mid

    @property
    def contended(self) -> bool:
        return self.wait_share >= CONTENDED_SHARE


@dataclass(frozen=True)
class RecordedCorrection:
    """What a baseline entry written under contention keeps of its correction: the samples the gate reads.

    ``samples_ns``: the corrected samples, a bounded subset like the entry's own; ``wait_share`` and
    ``uncertainty`` as ``Corrected`` has them. An entry written with no contention keeps none: its
    samples are its corrected ones.
    """

    samples_ns: tuple[float, ...]
    wait_share: float
    uncertainty: float
    source: WaitSource

    def as_corrected(self) -> Corrected:
        """The entry's side of a comparison: its corrected samples, the bracket as wide as recorded."""
        mid = statistics.median(self.samples_ns)
        half = self.uncertainty * mid
        lows = tuple(max(s - half, 0.0) for s in self.samples_ns)
        highs = tuple(s + half for s in self.samples_ns)
        return Corrected(self.samples_ns, lows, highs, self.wait_share, self.source)


def uncorrected(samples_ns: Sequence[float]) -> Corrected:
    """Samples with no accounting: taken as they are."""
    values = tuple(float(s) for s in samples_ns)
    return Corrected(values, values, values, 0.0, None)


def correct(samples_ns: Sequence[float], scheduling: Scheduling | None) -> Corrected:
    """``samples_ns`` (per call) with the run-queue wait ``scheduling`` accounted taken out (module docstring).

    Where the samples are a device's (``scheduling.launch_ns``), only launch-bound samples are corrected,
    and only for the wait.
    """
    if scheduling is None or len(scheduling.caller_wait_ns) != len(samples_ns) or not samples_ns:
        return uncorrected(samples_ns)
    wall = np.asarray(samples_ns, dtype=float)
    least, most = _wait_bracket(wall, scheduling)
    residue = np.zeros_like(wall)
    if len(scheduling.launch_ns) == wall.size:
        least, most = _device_wait(wall, np.asarray(scheduling.launch_ns, dtype=float), most)
    elif len(scheduling.caller_switches) == wall.size:
        left = wall - (least + most) / 2.0
        switches = np.asarray(scheduling.caller_switches, dtype=float)
        residue = np.minimum(_refill_cost(left, switches) * switches, RESIDUE_MAX_SHARE * np.maximum(left, 0.0))
    low = np.maximum(wall - most - (1.0 + RESIDUE_UNCERTAINTY) * residue, 0.0)
    high = np.maximum(wall - least - (1.0 - RESIDUE_UNCERTAINTY) * residue, 0.0)
    estimate = (low + high) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(wall > 0, (wall - estimate) / wall, 0.0)
    share = max(float(np.median(shares)), 0.0)
    return Corrected(_floats(estimate), _floats(low), _floats(high), share, scheduling.source)


def _refill_cost(left: np.ndarray, switches: np.ndarray) -> float:
    """The time each preemption added to a sample beyond its wait: the Theil-Sen slope of what is left
    after the wait (``left``) against the preemptions, over random pairs of unequally preempted samples
    (seeded: the same samples give the same fit). 0 where there are too few to fit it."""
    if left.size < RESIDUE_MIN_SAMPLES or np.ptp(switches) == 0:
        return 0.0
    rng = np.random.default_rng(0)
    i = rng.integers(0, left.size, _RESIDUE_PAIRS)
    j = rng.integers(0, left.size, _RESIDUE_PAIRS)
    apart = switches[i] != switches[j]
    if apart.sum() < RESIDUE_MIN_SAMPLES:
        return 0.0
    slopes = (left[i][apart] - left[j][apart]) / (switches[i][apart] - switches[j][apart])
    return max(float(np.median(slopes)), 0.0)


def _floats(values: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def _wait_bracket(wall: np.ndarray, s: Scheduling) -> tuple[np.ndarray, np.ndarray]:
    """Per sample, the least and the most waiting that could have stretched the call (module docstring)."""
    if s.source is WaitSource.CPU_TIME:
        # off-CPU time: at least what goes beyond the least any sample showed (the call's own sleeping), at most
        # all of it (a CPU-bound call sleeps none); under steady contention every sample waited, and the bracket
        # is as wide as that least
        off = np.asarray(s.caller_wait_ns, dtype=float)
        return np.maximum(off - off.min(), 0.0), off
    longest = np.asarray(s.longest_wait_ns, dtype=float)
    total = np.asarray(s.threads_wait_ns, dtype=float)
    cpu = np.asarray(s.threads_cpu_ns, dtype=float)
    # the process's own threads wanted more CPU than it may use: that much waiting is its own cost
    own = np.maximum(cpu + total - s.cpus * wall, 0.0)
    return np.maximum(longest - own, 0.0), np.maximum(total - own, 0.0)


def _device_wait(device: np.ndarray, host: np.ndarray, wait: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CUDA samples: the host's wait slowed a block only if it was launch-bound, and by at most the wait.

    A launch-bound block's device time follows the host's; without the wait the host would have
    launched in ``host - wait``, but the device's own work in the block is unknown (anything up to
    its device time), so the bracket runs from no correction to the host's quiet time.
    """
    bound = (wait > 0) & (host >= LAUNCH_BOUND_SHARE * device)
    most = np.where(bound, np.minimum(wait, np.maximum(device - (host - wait), 0.0)), 0.0)
    return np.zeros_like(device), most
