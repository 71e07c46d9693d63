"""Settings as plain frozen objects, resolved once; the core never sees ``pytest.Config``.

``resolve`` merges the session's ``GpuperfConfig``, a test's ``MarkerOptions`` and the mode's
defaults into the one ``Settings`` a measurement is taken and judged with: nothing below picks a default.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.model import Statistic
from pytest_gpuperf.modes import DEFAULT_THRESHOLD, Mode, ModePlan, plan_for

# Documented defaults (docs/configuration.md); each mode's time threshold is its plan's (modes.py).
DEFAULT_MEMORY_THRESHOLD = 0.05  # relative growth of peak memory that counts as a regression
DEFAULT_MEMORY_MIN_INCREASE = 1 << 20  # bytes; a smaller peak change is allocator granularity, not a change
DEFAULT_METRIC = Statistic.P50
DEFAULT_WARMUP_TIME_S = 0.1
DEFAULT_MIN_TIME_S = 0.2
DEFAULT_MAX_TIME_S = 2.0
DEFAULT_TARGET_PRECISION = 0.01  # stop once the 95% CI of the median is within +-1%
DEFAULT_MIN_SAMPLES = 6  # the distribution-free 95% CI of the median exists from 6 samples on (stopping.py)
DEFAULT_TIME_LIMIT_S = 120.0  # the most one measurement may take, warm-up included
DEFAULT_REMEASURES = 1
DEFAULT_CONFIRM_PAIRS = 12  # the most fresh process pairs a compare-ref suspicion takes (verdict/pairs.py)
DEFAULT_WORKER_START_TIMEOUT_S = 300.0  # compare-ref's worker at REF: importing torch and collecting its tests
DEFAULT_NOISE_MULTIPLIER = 3.0  # standard deviations of between-run noise a change must exceed
DEFAULT_CONFIDENCE = 0.95
DEFAULT_BASELINE_DIR = "baselines"

CALIBRATE_CHOICES = ("on", "off")
DEVICE_SPEC = re.compile(r"auto|cpu|cuda(?::(?P<index>\d+))?")
DEVICE_CHOICES = '"auto", "cpu", "cuda" or "cuda:N"'


class BusyPolicy(str, Enum):
    """What the CPU host guard does with the kernel's contention counters (``gpuperf_busy_policy``)."""

    # Every measurement carries its scheduler accounting, and its verdict reads the times less their run-queue
    # wait: the policy only concerns what has none (host/cpu/rules.py, BusyRunner). retake and unstable: such a
    # change measured busy is unstable and taken again in a fresh process; judge: the counters are evidence only.
    RETAKE = "retake"
    UNSTABLE = "unstable"
    JUDGE = "judge"

    def __str__(self) -> str:
        return self.value


class BaseTests(str, Enum):
    """Which version of the perf tests compare-ref's base runs (``--gpuperf-base-tests``; docs/configuration.md)."""

    AUTO = "auto"  # the base's own test file where it defines every selected test of it, else the head's
    HEAD = "head"  # the head's test files, conftest files and pytest configuration for every test
    BASE = "base"  # the base's own test files: a test the base lacks is new

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class MeasureSettings:
    """How long and how precisely to measure; the runner's knobs."""

    warmup_time_s: float = DEFAULT_WARMUP_TIME_S
    min_time_s: float = DEFAULT_MIN_TIME_S
    max_time_s: float = DEFAULT_MAX_TIME_S
    target_precision: float = DEFAULT_TARGET_PRECISION
    min_samples: int = DEFAULT_MIN_SAMPLES
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    l2_flush: bool = False
    cuda_graph: bool = False
    energy: bool = False  # the device's energy per call as a gated metric (gpu/device_state.py; CUDA with NVML)
    rounds: int | None = None  # a fixed number of samples (benchmark.pedantic); None: the stopping rule decides

    def __post_init__(self) -> None:
        if self.rounds is not None and self.rounds < 1:
            raise ConfigError(f"fixed rounds must be >= 1, got {self.rounds}")
        if self.min_samples < 1:
            raise ConfigError(f"min samples must be >= 1, got {self.min_samples}")
        # Each problem names the option; the plugin swaps in the ini key where the value came from there.
        for option, value, positive in (
            ("--gpuperf-warmup-time", self.warmup_time_s, False),
            ("--gpuperf-min-time", self.min_time_s, False),
            ("--gpuperf-max-time", self.max_time_s, True),
            ("--gpuperf-time-limit", self.time_limit_s, True),
        ):
            if problem := seconds_problem(value, positive=positive):
                raise ConfigError(f"{option} {problem}")
        if self.min_time_s > self.max_time_s:
            raise ConfigError(f"min time {self.min_time_s}s exceeds max time {self.max_time_s}s")
        if not 0 < self.target_precision < 1:
            raise ConfigError(f"--gpuperf-target-precision must be in (0, 1), got {self.target_precision}")


def seconds_problem(value: object, *, positive: bool) -> str | None:
    """Why ``value`` is no time setting (None: it is one): a finite number of seconds, >= 0 or > 0.

    NaN is refused: every comparison with it is false, so a NaN budget would never end a measurement.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number, got {value!r}"
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        return f"must be a {'positive' if positive else 'finite, non-negative'} number of seconds, got {value!r}"
    return None


@dataclass(frozen=True)
class AutoThreshold:
    """``--gpuperf-auto-threshold=LOW,HIGH``: each test's time threshold is the change it can resolve on this
    runner (its minimum detectable change, verdict/detectable.py), kept within ``[low, high]``."""

    low: float
    high: float

    def __post_init__(self) -> None:
        for value in (self.low, self.high):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"--gpuperf-auto-threshold bounds must be numbers, got {value!r}")
        if not 0 < self.low <= self.high < 10:
            raise ConfigError(
                f"--gpuperf-auto-threshold must be LOW,HIGH with 0 < LOW <= HIGH < 10 (fractions like 0.01,0.1), "
                f"got {self}"
            )

    @classmethod
    def parse(cls, text: str) -> AutoThreshold:
        """``"0.01,0.1"`` as bounds; ValueError (a usage error where the option is parsed) otherwise."""
        parts = [p.strip() for p in str(text).split(",")]
        if len(parts) != 2:
            raise ValueError(f"--gpuperf-auto-threshold must be LOW,HIGH, got {text!r}")
        try:
            return cls(float(parts[0]), float(parts[1]))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        except ValueError:
            raise ValueError(f"--gpuperf-auto-threshold must be two numbers LOW,HIGH, got {text!r}") from None

    def pick(self, detectable: float | None) -> float:
        """The threshold for a test that resolves ``detectable`` (None: unknown, the high bound)."""
        if detectable is None or not math.isfinite(detectable):
            return self.high
        return min(self.high, max(self.low, detectable))

    def __str__(self) -> str:
        return f"{self.low:g},{self.high:g}"


@dataclass(frozen=True)
class GateSettings:
    """How strict the verdict is, for one measurement; built by ``resolve`` only."""

    threshold: float = DEFAULT_THRESHOLD  # smallest relative time change that may fail, for this mode
    memory_threshold: float = DEFAULT_MEMORY_THRESHOLD
    statistic: Statistic = DEFAULT_METRIC  # the statistic compared; the evidence is always about medians
    noise_multiplier: float = DEFAULT_NOISE_MULTIPLIER  # standard deviations of recorded between-run noise
    strict: bool = False  # not comparable, unstable and not gated fail the test too
    confidence: float = DEFAULT_CONFIDENCE
    memory_min_increase_bytes: int = DEFAULT_MEMORY_MIN_INCREASE  # a memory regression needs this and the threshold
    remeasures: int = DEFAULT_REMEASURES  # readings that confirm a suspected regression (readings.py)
    confirm_pairs: int = DEFAULT_CONFIRM_PAIRS
    min_samples: int = DEFAULT_MIN_SAMPLES  # the fewest samples a side needs for a time verdict
    # each test's time threshold from what it resolves, within bounds (verdict/judge.py); None: ``threshold``
    auto_threshold: AutoThreshold | None = None

    def __post_init__(self) -> None:
        for name in ("threshold", "memory_threshold", "noise_multiplier"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
        if not 0.5 <= self.confidence < 1.0:
            raise ConfigError(f"GateSettings.confidence must be in [0.5, 1), got {self.confidence!r}")


@dataclass(frozen=True)
class Settings:
    """Everything one measurement is taken and judged with: the product of ``resolve``."""

    plan: ModePlan  # the session's mode and what follows from it
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    gate: GateSettings = field(default_factory=GateSettings)
    profile_diff: bool = True  # profile a confirmed time regression on both sides (a baseline write: store it)

    @property
    def enabled(self) -> bool:
        return self.plan.measures


@dataclass(frozen=True)
class BenchmarkOptions:
    """pytest-benchmark settings that mean the same here (benchmark_options.py)."""

    max_time: float | None = None  # seconds of measuring, as max_time_s
    min_rounds: int | None = None  # samples at least: raises min_samples, never lowers it
    precision: float | None = None  # the target precision, here of the median


@dataclass(frozen=True)
class GpuperfConfig:
    """The session's choices, converted once from pytest's options and ini values."""

    enabled: bool = False
    update_baseline: bool = False
    baseline_dir: Path = Path(DEFAULT_BASELINE_DIR)
    rootdir: Path = Path(".")
    device: str = "auto"
    threshold: float | None = None  # None: the mode's default (10% baseline, 2% compare-ref)
    auto_threshold: AutoThreshold | None = None  # --gpuperf-auto-threshold: each test's from what it resolves
    memory_threshold: float = DEFAULT_MEMORY_THRESHOLD
    metric: Statistic = DEFAULT_METRIC
    strict: bool = False
    explain: bool = False  # print every measurement's rules (--gpuperf-explain)
    calibrate: str = "off"  # retired: accepted, said so in the header (the machine's reference replaced it)
    remeasures: int = DEFAULT_REMEASURES
    confirm_pairs: int = DEFAULT_CONFIRM_PAIRS
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    compare_ref: str | None = None
    json_path: Path | None = None
    markdown_path: Path | None = None
    benchmark_json_path: Path | None = None
    html_path: Path | None = None
    profile_dir: Path | None = None
    nsight: bool = False
    nvtx: bool = True
    # Added to a worker's command line: -p choices, user options, resolved settings (options.worker_args).
    worker_args: tuple[str, ...] = ()
    # What re-runs one measurement as this session did: -p choices, user options, settings off their defaults.
    repro_args: tuple[str, ...] = ()
    pin_cpu: str = "auto"  # "auto", "off" or a CPU number (host/cpu/pinning.py)
    profile_diff: bool = True  # --gpuperf-no-profile-diff / gpuperf_profile_diff = false turn it off
    busy_policy: BusyPolicy = BusyPolicy.RETAKE
    worker_start_timeout_s: float = DEFAULT_WORKER_START_TIMEOUT_S  # compare-ref's wait for the worker at REF
    base_tests: BaseTests = BaseTests.AUTO  # compare-ref: which version of the tests the base runs
    inifile: Path | None = None  # the session's pytest configuration file (compare-ref's base may run it)

    def __post_init__(self) -> None:
        if DEVICE_SPEC.fullmatch(self.device.strip().lower()) is None:
            raise ConfigError(f"--gpuperf-device: unknown device {self.device!r}; use {DEVICE_CHOICES}")
        try:
            object.__setattr__(self, "metric", Statistic.parse(self.metric))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.calibrate not in CALIBRATE_CHOICES:
            raise ConfigError(f"--gpuperf-calibrate must be one of {CALIBRATE_CHOICES}, got {self.calibrate!r}")
        for name in ("threshold", "memory_threshold"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 10:
                raise ConfigError(f"--gpuperf-{name.replace('_', '-')} must be a fraction like 0.1, got {value}")
        parse_pin_cpu(self.pin_cpu)
        try:
            object.__setattr__(self, "busy_policy", BusyPolicy(self.busy_policy))
        except ValueError:
            choices = ", ".join(p.value for p in BusyPolicy)
            raise ConfigError(f"--gpuperf-busy-policy must be one of {choices}, got {self.busy_policy!r}") from None
        try:
            object.__setattr__(self, "base_tests", BaseTests(self.base_tests))
        except ValueError:
            choices = ", ".join(p.value for p in BaseTests)
            raise ConfigError(f"--gpuperf-base-tests must be one of {choices}, got {self.base_tests!r}") from None
        if self.remeasures < 0:
            raise ConfigError(f"--gpuperf-remeasure must be >= 0, got {self.remeasures}")
        if self.confirm_pairs < 0 or self.confirm_pairs in (1, 2):
            raise ConfigError(
                f"--gpuperf-confirm-pairs must be 0 (off) or at least 3, got {self.confirm_pairs}: "
                "the verdict needs the spread of several independent pairs"
            )
        if problem := seconds_problem(self.worker_start_timeout_s, positive=True):
            raise ConfigError(f"--gpuperf-worker-start-timeout {problem}")
        if self.update_baseline and self.compare_ref:
            raise ConfigError("--gpuperf-update-baseline and --gpuperf-compare-ref cannot be combined")

    @property
    def traces_dir(self) -> Path:
        """Where differential-profile traces go, for CI to upload: beside the first report, or the profile folder."""
        for report in (self.json_path, self.markdown_path, self.html_path, self.benchmark_json_path):
            if report is not None:
                return report.parent / "gpuperf-profiles"
        if self.profile_dir is not None:
            return self.profile_dir
        return self.rootdir / ".gpuperf" / "profiles"

    @property
    def mode(self) -> Mode:
        if not self.enabled:
            return Mode.SMOKE
        if self.update_baseline:
            return Mode.UPDATE
        if self.compare_ref:
            return Mode.COMPARE_REF
        return Mode.BASELINE

    @property
    def plan(self) -> ModePlan:
        """The mode's plan: what this session measures with, judges by, confirms, writes and shows."""
        return plan_for(self.mode)


def parse_pin_cpu(value: str) -> int | str | None:
    """``auto``, ``off`` (None) or a core number; ConfigError naming the option otherwise."""
    if value == "off":
        return None
    if value == "auto":
        return value
    try:
        core = int(value)
    except ValueError:
        core = -1
    if core < 0:
        raise ConfigError(f"--gpuperf-pin-cpu must be auto, off or a CPU number, got {value!r}")
    return core


@dataclass(frozen=True)
class MarkerOptions:
    """Per-test overrides from ``@pytest.mark.gpuperf(...)``; ``None`` means "session default"."""

    threshold: float | None = None
    memory_threshold: float | None = None
    metric: str | None = None
    warmup_time: float | None = None
    min_time: float | None = None
    max_time: float | None = None
    target_precision: float | None = None
    time_limit: float | None = None
    l2_flush: bool | None = None
    cuda_graph: bool | None = None
    energy: bool | None = None
    calibrate: bool | None = None  # retired: accepted for the tests that set it, and ignored
    remeasure: int | None = None

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any], *, test_id: str) -> MarkerOptions:
        kwargs = dict(kwargs)
        if "remeasures" in kwargs:  # the spelling before the keyword took the option's name
            kwargs.setdefault("remeasure", kwargs.pop("remeasures"))
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ConfigError(
                f"unknown @pytest.mark.gpuperf keyword(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}",
                test_id=test_id,
            )
        for name, value in kwargs.items():
            if value is not None and (problem := _MARKER_CHECKS[name](value)):
                raise ConfigError(f"@pytest.mark.gpuperf({name}=...) {problem}", test_id=test_id)
        return cls(**kwargs)


def _fraction(value: object, *, upper: float, open_low: bool = False) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number, got {value!r}"
    low_ok = value > 0 if open_low else value >= 0
    if not (math.isfinite(value) and low_ok and value < upper):
        return f"must be a number in {'(' if open_low else '['}0, {upper:g}), got {value!r}"
    return None


def _flag(value: object) -> str | None:
    return None if isinstance(value, bool) else f"must be True or False, got {value!r}"


def _count(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return f"must be a whole number >= 0, got {value!r}"
    return None


def _statistic(value: object) -> str | None:
    try:
        Statistic.parse(value, what="")  # type: ignore[arg-type]
    except ValueError as exc:
        return str(exc).strip()
    return None


# Each @pytest.mark.gpuperf keyword's type and range, checked at collection (MarkerOptions.from_kwargs).
_MARKER_CHECKS: dict[str, Any] = {
    "threshold": lambda v: _fraction(v, upper=10),
    "memory_threshold": lambda v: _fraction(v, upper=10),
    "metric": _statistic,
    "warmup_time": lambda v: seconds_problem(v, positive=False),
    "min_time": lambda v: seconds_problem(v, positive=False),
    "max_time": lambda v: seconds_problem(v, positive=True),
    "target_precision": lambda v: _fraction(v, upper=1, open_low=True),
    "time_limit": lambda v: seconds_problem(v, positive=True),
    "l2_flush": _flag,
    "cuda_graph": _flag,
    "energy": _flag,
    "calibrate": _flag,
    "remeasure": _count,
}


def resolve(
    config: GpuperfConfig, marker: MarkerOptions | None = None, *, test_id: str = "",
    benchmark: BenchmarkOptions | None = None,
) -> Settings:  # fmt: skip
    """The one place where session options, ini values, marker keywords and the mode's defaults meet.

    ``@pytest.mark.gpuperf`` beats ``@pytest.mark.benchmark`` (``benchmark``), which beats the session.
    Compare-ref measures head and base interleaved on one machine, so it has a smaller default
    threshold and no use for the guards against a frozen number (noise floor, the machine's reference).
    """
    m = marker or MarkerOptions()
    b = benchmark or BenchmarkOptions()
    plan = config.plan
    base = config.measure
    max_time = _pick(m.max_time, _pick(b.max_time, max(base.max_time_s, m.min_time or 0.0)))
    try:
        measure = MeasureSettings(
            warmup_time_s=_pick(m.warmup_time, base.warmup_time_s),
            # a shorter pytest-benchmark max_time shortens the least time too
            min_time_s=_pick(m.min_time, min(base.min_time_s, b.max_time or math.inf)),
            max_time_s=max_time,
            target_precision=_pick(m.target_precision, _pick(b.precision, base.target_precision)),
            min_samples=max(base.min_samples, b.min_rounds or 0),
            time_limit_s=_pick(m.time_limit, base.time_limit_s),
            l2_flush=_pick(m.l2_flush, base.l2_flush),
            cuda_graph=_pick(m.cuda_graph, base.cuda_graph),
            energy=_pick(m.energy, base.energy),
        )
        threshold = _pick(m.threshold, config.threshold)
        if threshold is None:
            threshold = plan.default_threshold
        gate = GateSettings(
            threshold=threshold,
            memory_threshold=_pick(m.memory_threshold, config.memory_threshold),
            statistic=Statistic.parse(_pick(m.metric, config.metric)),
            strict=config.strict,
            remeasures=_pick(m.remeasure, config.remeasures) if plan.confirms_suspicions else 0,
            confirm_pairs=config.confirm_pairs,
            min_samples=measure.min_samples,
            auto_threshold=config.auto_threshold if m.threshold is None else None,  # a test's own threshold beats it
        )
    except ConfigError as exc:
        if marker is None and benchmark is None:
            raise
        which, keywords = ("gpuperf", m) if marker is not None else ("benchmark", b)
        given = ", ".join(f"{f.name}={v!r}" for f in fields(keywords) if (v := getattr(keywords, f.name)) is not None)
        raise ConfigError(f"@pytest.mark.{which}({given}): {exc}", test_id=test_id) from None
    return Settings(plan=plan, measure=measure, gate=gate, profile_diff=config.profile_diff and plan.measures)


def _pick(override: Any, default: Any) -> Any:
    return default if override is None else override


def with_fixed_rounds(settings: Settings, rounds: int) -> Settings:
    """``settings`` measuring exactly ``rounds`` samples (``benchmark.pedantic(rounds=...)``)."""
    return dataclasses.replace(settings, measure=dataclasses.replace(settings.measure, rounds=rounds))


def with_call_options(
    settings: Settings, *, l2_flush: bool | None, cuda_graph: bool | None, energy: bool | None = None
) -> Settings:
    """``settings`` with a single ``gpu_bench.measure(...)`` call's own switches applied."""
    given = (("l2_flush", l2_flush), ("cuda_graph", cuda_graph), ("energy", energy))
    changes = {name: value for name, value in given if value is not None}
    if not changes:
        return settings
    return dataclasses.replace(settings, measure=dataclasses.replace(settings.measure, **changes))
