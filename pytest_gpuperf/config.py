"""Plugin configuration as plain frozen objects; the core never sees ``pytest.Config``.

``GpuperfConfig`` is built once per session from options and ini values;
``MarkerOptions`` from a test's ``@pytest.mark.gpuperf(...)``, validated
against its own fields so an unknown keyword is named in the error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_gpuperf.cpu_pinning import validate_pin_setting
from pytest_gpuperf.errors import ConfigError

# Documented defaults (README "Configuration reference").
DEFAULT_THRESHOLD = 0.10  # relative time change that counts as a regression (baseline mode)
DEFAULT_COMPARE_REF_THRESHOLD = 0.02  # the same with --gpuperf-compare-ref (interleaved, same machine)
DEFAULT_MEMORY_THRESHOLD = 0.05  # relative growth of peak memory that counts as a regression
DEFAULT_METRIC = "p50"
DEFAULT_WARMUP_TIME_S = 0.1
DEFAULT_MIN_TIME_S = 0.2
DEFAULT_MAX_TIME_S = 2.0
DEFAULT_TARGET_PRECISION = 0.01  # stop once the 95% CI of the median is within +-1%
DEFAULT_MIN_SAMPLES = 6  # the fewest samples for which the distribution-free 95% CI of the median exists
DEFAULT_REMEASURES = 1
DEFAULT_CONFIRM_PAIRS = 6  # fresh process pairs that re-measure a suspected compare-ref regression
DEFAULT_BASELINE_DIR = "baselines"

TIME_METRICS = ("p50", "median", "mean", "p90", "p99", "min")
CALIBRATE_CHOICES = ("on", "off")


@dataclass(frozen=True)
class MeasureSettings:
    """How long and how precisely to measure; the runner's knobs."""

    warmup_time_s: float = DEFAULT_WARMUP_TIME_S
    min_time_s: float = DEFAULT_MIN_TIME_S
    max_time_s: float = DEFAULT_MAX_TIME_S
    target_precision: float = DEFAULT_TARGET_PRECISION
    l2_flush: bool = False
    cuda_graph: bool = False

    def __post_init__(self) -> None:
        if self.warmup_time_s < 0:
            raise ConfigError(f"warm-up time must be >= 0, got {self.warmup_time_s}")
        if self.min_time_s < 0 or self.max_time_s <= 0:
            raise ConfigError(f"time budget must be positive, got min={self.min_time_s} max={self.max_time_s}")
        if self.min_time_s > self.max_time_s:
            raise ConfigError(f"min time {self.min_time_s}s exceeds max time {self.max_time_s}s")
        if not 0 < self.target_precision < 1:
            raise ConfigError(f"target precision must be in (0, 1), got {self.target_precision}")


@dataclass(frozen=True)
class GpuperfConfig:
    """Everything a session needs, converted once from pytest's config."""

    enabled: bool = False
    update_baseline: bool = False
    baseline_dir: Path = Path(DEFAULT_BASELINE_DIR)
    rootdir: Path = Path(".")
    device: str = "auto"
    threshold: float | None = None  # None: the mode's default (10% baseline, 2% compare-ref)
    memory_threshold: float = DEFAULT_MEMORY_THRESHOLD
    metric: str = DEFAULT_METRIC
    strict: bool = False
    calibrate: str = "off"  # on CPUs too: docs/statistics.md, "Calibration"
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
    worker_address: str | None = None  # set in the base-ref worker process only
    plugin_args: tuple[str, ...] = ()  # the session's -p choices, repeated in worker processes
    pin_cpu: str = "auto"  # "auto", "off" or a CPU number (cpu_pinning.py)

    def __post_init__(self) -> None:
        if self.metric not in TIME_METRICS:
            raise ConfigError(f"--gpuperf-metric must be one of {', '.join(TIME_METRICS)}, got {self.metric!r}")
        if self.calibrate not in CALIBRATE_CHOICES:
            raise ConfigError(f"--gpuperf-calibrate must be one of {CALIBRATE_CHOICES}, got {self.calibrate!r}")
        for name in ("threshold", "memory_threshold"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 10:
                raise ConfigError(f"--gpuperf-{name.replace('_', '-')} must be a fraction like 0.1, got {value}")
        validate_pin_setting(self.pin_cpu)
        if self.remeasures < 0:
            raise ConfigError(f"--gpuperf-remeasure must be >= 0, got {self.remeasures}")
        if self.confirm_pairs < 0 or self.confirm_pairs in (1, 2):
            raise ConfigError(
                f"--gpuperf-confirm-pairs must be 0 (off) or at least 3, got {self.confirm_pairs}: "
                "the verdict needs the spread of several independent pairs"
            )
        if self.update_baseline and self.compare_ref:
            raise ConfigError("--gpuperf-update-baseline and --gpuperf-compare-ref cannot be combined")

    @property
    def mode(self) -> str:
        if not self.enabled:
            return "smoke"
        if self.update_baseline:
            return "update"
        if self.compare_ref:
            return "compare-ref"
        return "baseline"


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
    l2_flush: bool | None = None
    cuda_graph: bool | None = None
    calibrate: bool | None = None
    remeasures: int | None = None

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any], *, test_id: str) -> MarkerOptions:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ConfigError(
                f"unknown @pytest.mark.gpuperf keyword(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}",
                test_id=test_id,
            )
        numeric = ("threshold", "memory_threshold", "warmup_time", "min_time", "max_time", "target_precision")
        for name in numeric:
            value = kwargs.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"@pytest.mark.gpuperf({name}=...) must be a number, got {value!r}", test_id=test_id)
        metric = kwargs.get("metric")
        if metric is not None and metric not in TIME_METRICS:
            raise ConfigError(
                f"@pytest.mark.gpuperf(metric=...) must be one of {', '.join(TIME_METRICS)}, got {metric!r}",
                test_id=test_id,
            )
        return cls(**dict(kwargs))

    def apply(self, config: GpuperfConfig, *, test_id: str) -> GpuperfConfig:
        """The session config with this test's overrides applied."""
        m = config.measure
        try:
            measure = MeasureSettings(
                warmup_time_s=_pick(self.warmup_time, m.warmup_time_s),
                min_time_s=_pick(self.min_time, m.min_time_s),
                max_time_s=_pick(self.max_time, max(m.max_time_s, self.min_time or 0.0)),
                target_precision=_pick(self.target_precision, m.target_precision),
                l2_flush=_pick(self.l2_flush, m.l2_flush),
                cuda_graph=_pick(self.cuda_graph, m.cuda_graph),
            )
            calibrate = config.calibrate if self.calibrate is None else ("on" if self.calibrate else "off")
            return dataclasses.replace(
                config,
                threshold=_pick(self.threshold, config.threshold),
                memory_threshold=_pick(self.memory_threshold, config.memory_threshold),
                metric=_pick(self.metric, config.metric),
                calibrate=calibrate,
                remeasures=_pick(self.remeasures, config.remeasures),
                measure=measure,
            )
        except ConfigError as exc:
            raise ConfigError(f"@pytest.mark.gpuperf: {exc}", test_id=test_id) from None


def _pick(override: Any, default: Any) -> Any:
    return default if override is None else override
