"""The data every other module speaks: measurements, environments, verdicts.

Frozen dataclasses with no behaviour beyond derived values, so the other layers can depend on it
without depending on each other. Times are nanoseconds (floats: a sample is the mean over a block
of calls), memory is bytes.

May import: errors, modes, stats and units only: every other room depends on the model.
"""

from __future__ import annotations

import enum
import functools
import math
import numbers
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal

import numpy as np

# re-exported: a measurement's scheduling accounting and device state are part of the model every room speaks
from pytest_gpuperf.model.device_state import ENERGY_METRIC as ENERGY_METRIC
from pytest_gpuperf.model.device_state import DeviceState as DeviceState
from pytest_gpuperf.model.device_state import DeviceSummary as DeviceSummary
from pytest_gpuperf.model.device_state import EnergySource as EnergySource
from pytest_gpuperf.model.scheduling import Corrected as Corrected
from pytest_gpuperf.model.scheduling import RecordedCorrection as RecordedCorrection
from pytest_gpuperf.model.scheduling import Scheduling as Scheduling
from pytest_gpuperf.model.scheduling import WaitSource as WaitSource
from pytest_gpuperf.model.scheduling import correct, uncorrected
from pytest_gpuperf.model.storable import METRIC_NAME_MAX_CHARS, UNIT_MAX_CHARS, unstorable
from pytest_gpuperf.modes import Mode

DEFAULT_MEASUREMENT = "default"

Direction = Literal["lower", "higher"]


class Verdict(str, enum.Enum):
    """The gate's answer for one metric of one measurement.

    Worst first: the order in which a measurement's verdicts combine and reports list them (VERDICT_ORDER).
    """

    REGRESSION = "regression"
    NOT_COMPARABLE = "not comparable"
    UNSTABLE = "unstable"
    NOT_GATED = "not gated"  # too few samples for any verdict (a call slower than the time limit allows)
    # compare-ref: its interval reaches both sides of the threshold when the readings' budget was spent
    NOT_RESOLVED = "not resolved"
    IMPROVEMENT = "improvement"
    NEW = "new"
    UNCHANGED = "unchanged"


VERDICT_ORDER = tuple(Verdict)


class Kind(str, enum.Enum):
    """What a comparison compares; rules and reports branch on this, never on a metric's name."""

    TIME = "time"
    MEMORY = "memory"
    METRIC = "metric"


class Statistic(str, enum.Enum):
    """The time statistics a gate can compare (``--gpuperf-metric``); one list for config, CLI and model."""

    P50 = "p50"
    MEDIAN = "median"
    MEAN = "mean"
    P90 = "p90"
    P99 = "p99"
    MIN = "min"

    @classmethod
    def parse(cls, value: str | Statistic, *, what: str = "--gpuperf-metric") -> Statistic:
        """``value`` as a Statistic; ValueError naming ``what`` and the choices otherwise."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(s.value for s in cls)
            raise ValueError(f"{what} must be one of {choices}, got {value!r}") from None


class NoteKind(str, enum.Enum):
    """What a measurement's note is for: reports select notes by it, never by their wording."""

    NOTICE = "notice"  # the reader must see it: the terminal lists it under "gpuperf notes"
    # what a report's table already shows or what changes nothing (precision short of its target,
    # rounds pinned to a CPU, a smoke run, clocks trimmed within bounds): kept in the files
    ROUTINE = "routine"


# Note topics (``Note.topic``): what a note is about, for notes whose words differ per measurement
WRITTEN_BUSY = "written-busy"  # a baseline written while the runner was busy (its write, and each gate against it)
BASELINE_WRITE = "baseline-write"  # how a baseline entry was checked when written
QUIET_WAIT = "quiet-wait"  # a wait for the machine to recover before measuring


@dataclass(frozen=True)
class Note:
    """One note of a measurement: its text and its kind."""

    text: str
    kind: NoteKind = NoteKind.NOTICE
    # what the note is about ("written-busy", "baseline-write"): the terminal writes a topic's notes as one line
    # with a count and the measurements it concerns; "": the note's text is its own group
    topic: str = ""


def measurement_key(test_id: str, name: str) -> str:
    """The identity of a measurement across runs: the pytest node id plus its name."""
    return f"{test_id}::{name}"


@dataclass(frozen=True)
class Environment:
    """Where a measurement ran. ``device_class`` decides what is comparable."""

    device_class: str
    device_type: str  # "cuda" or "cpu"
    device_name: str
    cpu_model: str
    python: str
    torch: str | None = None
    cuda: str | None = None
    driver: str | None = None
    gpu_uuid: str | None = None
    platform: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Provenance:
    """The git state a measurement was taken at (all optional: no git, no data)."""

    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = None
    commit_date: str | None = None  # ISO 8601


@dataclass(frozen=True)
class SampleStats:
    """Summary statistics of per-call times in nanoseconds."""

    count: int
    mean_ns: float
    median_ns: float
    p90_ns: float
    p99_ns: float
    min_ns: float
    max_ns: float
    iqr_ns: float
    stdev_ns: float

    @classmethod
    def from_samples(cls, samples_ns: Sequence[float]) -> SampleStats:
        if not samples_ns:
            raise ValueError("no samples")
        ordered = sorted(float(s) for s in samples_ns)
        median, p90, p99, q1, q3 = (float(q) for q in np.percentile(ordered, [50, 90, 99, 25, 75]))  # linear
        return cls(
            count=len(ordered),
            mean_ns=statistics.fmean(ordered),
            median_ns=median,
            p90_ns=p90,
            p99_ns=p99,
            min_ns=ordered[0],
            max_ns=ordered[-1],
            iqr_ns=q3 - q1,
            stdev_ns=statistics.stdev(ordered) if len(ordered) > 1 else 0.0,
        )

    def get(self, statistic: Statistic | str) -> float:
        """Look a statistic up (``Statistic.P50``, or its short name ``"p50"``)."""
        return {
            Statistic.P50: self.median_ns,
            Statistic.MEDIAN: self.median_ns,
            Statistic.MEAN: self.mean_ns,
            Statistic.P90: self.p90_ns,
            Statistic.P99: self.p99_ns,
            Statistic.MIN: self.min_ns,
        }[Statistic.parse(statistic, what="time statistic")]


@dataclass(frozen=True)
class Metric:
    """A gateable number other than time: a speedup, a graph-break count, a fraction of peak.

    ``tolerance`` is the relative change against the baseline still fine (``None``: bounds only);
    ``absolute_tolerance`` is for counts, where any increase above it fails (graph breaks: 0);
    ``minimum``/``maximum`` are hard bounds checked even without a baseline.
    """

    name: str
    value: float
    unit: str = ""
    better: Direction = "higher"
    tolerance: float | None = 0.10
    absolute_tolerance: float | None = None
    minimum: float | None = None
    maximum: float | None = None
    description: str = ""


_METRIC_NUMBERS = ("value", "tolerance", "absolute_tolerance", "minimum", "maximum")


def metric_problems(metric: Metric) -> list[str]:
    """What is wrong with ``metric`` as declared, each naming its argument; empty: nothing.

    Its value, tolerances and bounds must be numbers (``tolerance="0.1"`` would reach the
    verdict's arithmetic) and finite (:func:`not_finite`); its name and unit text every history
    store keeps alike (``model/storable.py``), so a run never stores on one backend and not another.
    """
    problems = []
    for name in _METRIC_NUMBERS:
        given = getattr(metric, name)
        if given is not None and (isinstance(given, bool) or not isinstance(given, numbers.Real)):
            problems.append(f"{name}={given!r} is not a number")
    if not problems and (bad := not_finite(metric)):
        given = ", ".join(f"{k}={getattr(metric, k)!r}" for k in bad)
        problems.append(f"{given} is not a finite number; NaN and infinities satisfy no bound and cannot be "
                        "stored (no bound: None)")  # fmt: skip
    for name, limit in (("name", METRIC_NAME_MAX_CHARS), ("unit", UNIT_MAX_CHARS)):
        text = getattr(metric, name)
        if not isinstance(text, str) or (name == "name" and not text):
            problems.append(f"{name}={text!r} is not a non-empty string" if name == "name" else
                            f"{name}={text!r} is not a string")  # fmt: skip
        elif reason := unstorable(text, limit=limit):
            problems.append(f"{name} {reason}")
    if metric.better not in ("higher", "lower"):
        problems.append(f"better={metric.better!r} is neither 'higher' nor 'lower'")
    return problems


def not_finite(value: Metric | Throughput) -> list[str]:
    """The number fields of ``value`` that hold NaN or an infinity.

    A metric or a throughput figure is given by the user; such a number satisfies no bound, makes every
    comparison false and cannot be stored in JSON, so it is refused where it enters (the fixture).
    """
    return [f.name for f in fields(value) if isinstance(v := getattr(value, f.name), numbers.Real)
            and not math.isfinite(v)]  # fmt: skip


@dataclass(frozen=True)
class Throughput:
    """Work per call, given by the user, turned into rates."""

    items: float | None = None
    flops: float | None = None
    bytes: float | None = None

    def rates(self, seconds_per_call: float) -> dict[str, float]:
        if seconds_per_call <= 0:
            return {}
        work = {"items_per_s": self.items, "flop_per_s": self.flops, "bytes_per_s": self.bytes}
        return {name: amount / seconds_per_call for name, amount in work.items() if amount is not None}


@dataclass(frozen=True)
class ProfileSummary:
    """What ``--gpuperf-profile`` captured for one measurement."""

    trace_path: str
    top_ops: tuple[tuple[str, float, float], ...] = ()  # (name, device-or-cpu time ns, share 0..1)
    activities: tuple[str, ...] = ()


OpKind = Literal["operator", "kernel", "function"]  # torch.profiler's operators and kernels; Python's functions


@dataclass(frozen=True)
class OpStat:
    """One operator, kernel or Python function of a profiled call, averaged per measured call."""

    name: str  # the real name: "aten::mm", a cuBLAS or Triton kernel's name, "pkg/mod.py:12(fn)"
    kind: OpKind
    calls: float  # occurrences per measured call (2.0: launched twice per call)
    host_ns: float  # self CPU time per measured call (the mean over the profiled calls)
    device_ns: float = 0.0  # self device time per measured call (0 on the CPU)
    # Per profiled call, the samples of the row's interval (profiling/explain.py); () in tables written before them.
    host_samples_ns: tuple[float, ...] = ()
    device_samples_ns: tuple[float, ...] = ()


@dataclass(frozen=True)
class OpProfile:
    """A compact profile table of one measured call: what a differential profile compares and a baseline entry keeps.

    torch.profiler's rows are operators and kernels; Python's profiler's (a call that runs no torch
    operator: profiling/capture.py) are functions. ``host_ns``: CPU time of the whole call (Python,
    dispatch, launches); ``device_ns``: its summed kernel time, on CUDA only. ``ops``: its rows by time
    (a baseline entry keeps the top ones: a few KB in a baseline file).
    """

    device_type: str  # "cpu" or "cuda"
    profiled_calls: int
    host_ns: float
    device_ns: float | None = None
    ops: tuple[OpStat, ...] = ()
    torch: str | None = None
    omitted_below_ns: float = 0.0  # ops under this time per call were left out of ``ops`` (0: none were)
    host_samples_ns: tuple[float, ...] = ()  # each profiled call's CPU time (its mean is ``host_ns``)
    device_samples_ns: tuple[float, ...] = ()  # each profiled call's kernel time (CUDA)

    @property
    def on_device(self) -> bool:
        return self.device_type == "cuda"

    @property
    def profiler(self) -> Literal["torch", "python"]:
        """Which profiler took the table: Python's, whose rows are functions, or torch.profiler."""
        return "python" if any(s.kind == "function" for s in self.ops) else "torch"

    @property
    def samples_ns(self) -> tuple[float, ...]:
        """Each profiled call's time on the basis the rows are ranked by (device time on CUDA)."""
        return self.device_samples_ns if self.on_device else self.host_samples_ns


@dataclass(frozen=True)
class OpChange:
    """One row of a differential profile: an op on both sides, or on one.

    A stored profile keeps its top ops only (``OpProfile.omitted_below_ns``): an op missing from a
    side whose table was cut ``grew`` from below the cut (or ``shrank`` below it), its count and time
    there unknown; only a complete table says an op ``appeared`` or ``disappeared``.
    """

    name: str
    kind: OpKind
    base: OpStat | None  # None: not in the base's table
    head: OpStat | None  # None: not in the head's table
    on_device: bool  # ranked by device time (CUDA) or host time (CPU)
    absent_below_ns: float = 0.0  # the cut of the side without the op (0: that side's table was complete)

    @property
    def status(self) -> Literal["appeared", "disappeared", "grew", "shrank", "changed"]:
        if self.base is None:
            return "grew" if self.absent_below_ns > 0 else "appeared"
        if self.head is None:
            return "shrank" if self.absent_below_ns > 0 else "disappeared"
        return "changed"

    @property
    def counts_known(self) -> bool:
        """Whether both sides' call counts are known (an op under a side's cut has none)."""
        return self.status in ("appeared", "disappeared", "changed")

    def _time(self, stat: OpStat | None) -> float:
        return 0.0 if stat is None else stat.device_ns if self.on_device else stat.host_ns

    @property
    def base_ns(self) -> float:
        return self._time(self.base)

    @property
    def head_ns(self) -> float:
        return self._time(self.head)

    @property
    def delta_ns(self) -> float:
        """Change in time per measured call, head minus base (a side under its cut counts as 0): the diff's rank."""
        return self.head_ns - self.base_ns

    @property
    def calls_changed(self) -> bool:
        if not self.counts_known:
            return False
        base = self.base.calls if self.base else 0.0
        head = self.head.calls if self.head else 0.0
        return abs(head - base) >= 0.5


WhyRole = Literal["cause", "offset", "replaced", "noise", "rest"]
WhyReading = Literal["appeared", "disappeared", "grew", "shrank", "calls", "slower", "faster", "unchanged", "rest"]


@dataclass(frozen=True)
class WhyRow:
    """One line of a regression's explanation (profiling/explain.py): a part of the measured change.

    ``delta_ns`` is the time per measured call it accounts for, head minus base, with its interval
    (``low_ns``..``high_ns``; None where the profile has no per-call samples). ``role``: a ``cause``
    moves the way the measurement did and is resolved; an ``offset`` is resolved the other way; a
    ``replaced`` op is the other half of the cause before it (A replaced by B); ``noise`` rows have
    an interval that includes zero; the ``rest`` row is what the rows before it leave of the measured change.
    """

    name: str
    kind: Literal["operator", "kernel", "function", "rest"]
    reading: WhyReading
    role: WhyRole
    delta_ns: float
    low_ns: float | None = None
    high_ns: float | None = None
    base_calls: float | None = None  # calls per measured call on each side (None: unknown, under a cut)
    head_calls: float | None = None
    base_ns: float = 0.0  # the op's time per measured call on each side
    head_ns: float = 0.0
    exact: bool = False  # a count that changed (added, removed, more calls): a fact, its time an estimate
    other_half: str | None = None  # a replaced op's successor (the row before it)


@dataclass(frozen=True)
class MeasuredChange:
    """The gate's change in time per call that a profile diff explains: head minus base, with its interval."""

    delta_ns: float
    low_ns: float
    high_ns: float


# explained: causes account for at least half the change; partial: for less; spread: no cause is resolved;
# disagrees: the profile's total and the measurement are apart beyond both intervals; no-intervals: a
# stored profile without per-call samples.
WhyFinding = Literal["explained", "partial", "spread", "disagrees", "no-intervals"]


@dataclass(frozen=True)
class ProfileDiff:
    """Why a confirmed time regression got slower: the head's profile against the base's.

    ``base`` is None where the reference has no profile (an entry written before profiles were
    stored): ``changes`` then lists the head's top ops alone and ``note`` says so.
    """

    head: OpProfile
    base: OpProfile | None
    base_label: str  # "baseline abc1234", "ref main (abc1234)"
    changes: tuple[OpChange, ...] = ()  # by |delta_ns|; ops that only got faster last
    head_trace: str | None = None  # Chrome traces written beside the reports
    base_trace: str | None = None
    note: str = ""
    # The explanation (profiling/explain.py): rows that add up to ``measured`` with the rest row.
    rows: tuple[WhyRow, ...] = ()
    measured: MeasuredChange | None = None
    profile_change: MeasuredChange | None = None  # the profile's own total per call, head minus base
    finding: WhyFinding | None = None  # None: no base to explain against
    basis: Literal["host", "device"] = "host"  # the rows' time: kernels' device time, or operators' host time

    @property
    def host_delta_ns(self) -> float | None:
        return None if self.base is None else self.head.host_ns - self.base.host_ns

    @property
    def device_delta_ns(self) -> float | None:
        if self.base is None or self.head.device_ns is None or self.base.device_ns is None:
            return None
        return self.head.device_ns - self.base.device_ns


@dataclass(frozen=True)
class BenchmarkInfo:
    """What pytest-benchmark's ``benchmark`` fixture knows of its test, for ``--benchmark-json``.

    ``params`` and ``extra_info`` hold JSON values only (others as their repr).
    """

    name: str
    fullname: str
    group: str | None = None
    param: str | None = None
    params: Mapping[str, object] = field(default_factory=dict)
    extra_info: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Measurement:
    """One named measurement of one test: the raw samples and everything known about them."""

    test_id: str
    name: str
    samples_ns: tuple[float, ...]
    calls_per_sample: int
    device: str  # "cpu", "cuda:0"
    timer: str  # "perf_counter" or "cuda_event"
    round_medians_ns: tuple[float, ...] = ()  # medians of the measurement rounds (drift/noise)
    process_medians_ns: tuple[float, ...] = ()  # one median per fresh process (a baseline's reading and its checks)
    precision: float | None = None  # relative half-width of the 95% CI of the median
    # the reference work timed beside the rounds, per kind (measure/host/cpu/reference.py); empty: none (a GPU)
    reference_ns: Mapping[str, float] = field(default_factory=dict)
    # recorded by earlier versions (a calibration workload, a speed probe between tests): read, no longer taken
    calibration_ns: float | None = None
    speed_probe_ns: float | None = None
    speed_probe_spread: float | None = None
    written_busy: str | None = None  # where a baseline is written from this: the contention it was written under
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    throughput: Throughput = field(default_factory=Throughput)
    metrics: tuple[Metric, ...] = ()
    warmup_calls: int = 0
    total_calls: int = 0
    wall_time_s: float = 0.0
    unstable_reason: str | None = None
    notes: tuple[Note, ...] = ()
    health: Mapping[str, object] = field(default_factory=dict)
    profile: ProfileSummary | None = None  # --gpuperf-profile's capture
    op_profile: OpProfile | None = None  # the compact table a baseline entry keeps (update mode)
    benchmark: BenchmarkInfo | None = None  # where the ``benchmark`` fixture measured it
    # the scheduler's accounting per sample (measure/sched.py); None: not recorded (another runner, older files)
    scheduling: Scheduling | None = None
    # the round medians of the samples with their run-queue wait taken out (``corrected``), in time order
    corrected_round_medians_ns: tuple[float, ...] = ()
    # what NVML read beside each sample (model/device_state.py); None: not read (a CPU, no NVML, older files)
    device_state: DeviceState | None = None

    @property
    def key(self) -> str:
        return measurement_key(self.test_id, self.name)

    @functools.cached_property
    def stats(self) -> SampleStats:
        """Computed once per object (samples never change: the dataclass is frozen)."""
        return SampleStats.from_samples(self.samples_ns)

    @functools.cached_property
    def corrected(self) -> Corrected:
        """The samples with the time they waited for a CPU taken out (model/scheduling.py), computed once."""
        return correct(self.samples_ns, self.scheduling)

    @property
    def judged_round_medians_ns(self) -> tuple[float, ...]:
        """The round medians a verdict reads: corrected for run-queue wait where it was accounted."""
        return self.corrected_round_medians_ns or self.round_medians_ns

    @property
    def rates(self) -> dict[str, float]:
        return self.throughput.rates(self.stats.median_ns / 1e9)

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)


@dataclass(frozen=True)
class BaselineEntry:
    """What the store keeps for one measurement (the JSON schema mirrors it)."""

    key: str
    stats: SampleStats
    samples_ns: tuple[float, ...]  # a bounded, evenly thinned subset
    calls_per_sample: int
    device: str
    timer: str
    round_medians_ns: tuple[float, ...] = ()
    noise: float | None = None  # relative between-run spread of the median
    reference_ns: Mapping[str, float] = field(default_factory=dict)  # the machine's reference while it was written
    # recorded by earlier versions (a calibration workload, a speed probe): read, no longer written
    calibration_ns: float | None = None
    speed_probe_ns: float | None = None
    speed_probe_spread: float | None = None
    written_busy: str | None = None  # the host guard's evidence that the runner was busy while it was written
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    throughput: Throughput = field(default_factory=Throughput)
    metrics: tuple[Metric, ...] = ()
    environment: Environment | None = None
    provenance: Provenance = field(default_factory=Provenance)
    recorded_at: str | None = None  # ISO 8601 time of the run that wrote it
    profile: OpProfile | None = None  # the call's profile when written: the base of a later diff
    # written under contention: the samples with their run-queue wait taken out (None: none to take out)
    correction: RecordedCorrection | None = None
    device_state: DeviceSummary | None = None  # the device's clocks and power while it was written (None: not read)

    @property
    def corrected(self) -> Corrected:
        """The samples a verdict reads: corrected where the entry was written under contention."""
        if self.correction is not None:
            return self.correction.as_corrected()
        return uncorrected(self.samples_ns)


CONFIRMATION_STEP = "confirmation"  # the step fresh readings add to a suspected change (verdict/confirmation.py)


@dataclass(frozen=True)
class RuleNote:
    """What one rule of the verdict pipeline said about a comparison, and the verdict after it."""

    rule: str  # the rule's name: "noise-floor", "significance", "fast-end" ...
    verdict: Verdict
    note: str
    suspect: bool = False  # the verdict awaits confirmation (verdict/confirmation.py)
    absolute: bool = False  # a violated hard bound, which fails the test in every mode (verdict/judge.py)


@dataclass(frozen=True)
class CorrectedChange:
    """A time comparison's change with the run-queue wait taken out of both sides (model/scheduling.py).

    The verdict reads it; users read the wall clock's change beside it. ``ci_low``/``ci_high``: the
    interval of the ratio, widened by the correction's own ``uncertainty`` (both sides together);
    ``wait_share``/``reference_wait_share``: the share of each side's time lost to waiting for a CPU.
    """

    change: float
    ci_low: float | None  # None: unbounded (too few samples on a side)
    ci_high: float | None
    wait_share: float
    reference_wait_share: float
    uncertainty: float
    source: str  # WaitSource's word, or "" where no side accounted any

    def __post_init__(self) -> None:
        for name in ("ci_low", "ci_high"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                object.__setattr__(self, name, None)


@dataclass(frozen=True)
class Detectable:
    """What a time comparison's evidence can resolve (verdict/detectable.py, docs/statistics.md).

    ``change``: the smallest relative change that the gate, with its false-alarm control, would tell from no
    change with probability ``power``, given the interval's width (and, in baseline mode, the recorded noise).
    ``threshold``: the threshold it was set against; ``readings`` of kind ``reading`` ("round pairs", "fresh
    pairs", "samples") gave it; ``needed``: how many of them would bring it down to the threshold, None where
    more of them cannot (``limit`` says what stands in the way, "" where nothing does).
    """

    change: float
    threshold: float
    power: float
    readings: int
    reading: str
    needed: int | None = None
    limit: str = ""

    @property
    def resolves(self) -> bool:
        """Whether the threshold is at least the detectable change: a change of it can be told from none."""
        return self.change <= self.threshold


@dataclass(frozen=True)
class Comparison:
    """The gate's finding for one metric of one measurement, with the rules that reached it."""

    key: str
    metric: str  # a display name: "time.p50", "memory.peak_allocated", "metric.speedup" ...
    verdict: Verdict
    current: float
    baseline: float | None = None
    unit: str = "ns"
    change: float | None = None  # relative: +0.12 means 12% larger than the baseline
    ci_low: float | None = None  # CI on the ratio current / baseline
    ci_high: float | None = None
    p_value: float | None = None
    threshold: float | None = None  # the relative change the verdict needed
    evidence: str = ""
    baseline_commit: str | None = None
    note: str = ""
    kind: Kind = Kind.TIME
    explanation: tuple[RuleNote, ...] = ()  # every rule that acted, in order (verdict/pipeline.py)
    # a time change judged on contention-corrected times (the change above is the wall clock's)
    correction: CorrectedChange | None = None
    detectable: Detectable | None = None  # a time comparison's minimum detectable change (verdict/detectable.py)

    def __post_init__(self) -> None:
        # an unbounded CI (one sample a side) or infinite change (zero baseline) is unknown: null; JSON has no infinity
        for name in ("change", "ci_low", "ci_high", "p_value", "threshold"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                object.__setattr__(self, name, None)


@dataclass(frozen=True)
class MeasurementResult:
    """A measurement with its comparisons: the unit every report renders."""

    measurement: Measurement
    comparisons: tuple[Comparison, ...] = ()
    baseline: BaselineEntry | None = None
    outcome: str = "passed"  # the test's pytest outcome: passed, failed, error
    profile_diff: ProfileDiff | None = None  # on a confirmed time regression (profiling/diff.py)

    @property
    def verdict(self) -> Verdict:
        """The worst verdict over its comparisons (regression beats everything)."""
        return min((c.verdict for c in self.comparisons), key=VERDICT_ORDER.index, default=Verdict.NEW)


@dataclass(frozen=True)
class SessionResults:
    """Everything one ``pytest --gpuperf`` session produced."""

    results: tuple[MeasurementResult, ...]
    environment: Environment
    provenance: Provenance
    mode: Mode  # written as its word: "baseline", "compare-ref", "update"
    started_at: str
    compare_ref: str | None = None
    base_provenance: Provenance | None = None
    # The pytest options a re-run of one of its measurements needs besides the test, the mode and the device:
    # the settings that differ from their defaults, the -p choices and the project's own options (report/repro.py).
    repro_args: tuple[str, ...] = ()
