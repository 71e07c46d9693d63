"""The gate's rules: one measurement against its baseline entry -> Comparisons.

A time regression must be *large enough* and *significant* (asv's rule):

* large enough: the relative change of the chosen statistic exceeds the
  effective threshold ``max(settings.threshold, noise floor)``, where the noise
  floor is ``noise_multiplier`` standard deviations of the between-run spread
  recorded with the baseline and seen in the current run (stats.noise_floor);
* significant: the bootstrap CI of the ratio of medians lies entirely above 1.

With ``use_calibration`` and a calibration time on both sides, times are first
scaled by the ratio of the calibration times, so a machine that is uniformly 8%
slower today does not read as an 8% regression. docs/statistics.md gives the
reasoning.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_gpuperf import stats
from pytest_gpuperf.config import DEFAULT_COMPARE_REF_THRESHOLD, DEFAULT_MEMORY_THRESHOLD, DEFAULT_THRESHOLD
from pytest_gpuperf.model import (
    BaselineEntry,
    Comparison,
    Environment,
    Measurement,
    Metric,
    Verdict,
)

DEFAULT_MEMORY_MIN_INCREASE = 1 << 20  # bytes; below this a peak change is allocator noise
DEFAULT_NOISE_MULTIPLIER = 3.0
DEFAULT_FLOOR_QUANTILE = 0.10  # baseline mode: a change must show in the fastest 10% of calls too
# the calibration ratio outside this range means the machines differ, not the load
_CALIBRATION_SANE = (0.25, 4.0)


@dataclass(frozen=True)
class GateSettings:
    """How strict the gate is. Built once from the options by the plugin.

    threshold: smallest relative time change (fraction) that may fail, baseline mode.
    compare_ref_threshold: the same for --gpuperf-compare-ref, where head and base are
        interleaved on the same machine and far smaller changes are resolvable.
    memory_threshold / memory_min_increase_bytes: a peak-memory regression needs both.
    metric: the time statistic compared (p50, mean, min, p90 ...); the evidence is always
        the CI of the ratio of medians.
    noise_multiplier: standard deviations of between-run noise the change must exceed.
    strict: NOT_COMPARABLE and UNSTABLE fail the test too (see gate.fails).
    use_calibration: normalize by the calibration workload where both sides have one.
    floor_quantile: baseline mode only: a time verdict must also move this low quantile by half
        the threshold (None: off); see _floor_check.
    confidence: of every CI.
    """

    threshold: float = DEFAULT_THRESHOLD
    memory_threshold: float = DEFAULT_MEMORY_THRESHOLD
    metric: str = "p50"
    noise_multiplier: float = DEFAULT_NOISE_MULTIPLIER
    strict: bool = False
    use_calibration: bool = True
    confidence: float = stats.DEFAULT_CONFIDENCE
    compare_ref_threshold: float = DEFAULT_COMPARE_REF_THRESHOLD
    memory_min_increase_bytes: int = DEFAULT_MEMORY_MIN_INCREASE
    floor_quantile: float | None = DEFAULT_FLOOR_QUANTILE

    def __post_init__(self) -> None:
        for name in ("threshold", "memory_threshold", "compare_ref_threshold", "noise_multiplier"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"GateSettings.{name} must be a finite number >= 0, got {value!r}")
        if self.floor_quantile is not None and not 0 < self.floor_quantile < 0.5:
            raise ValueError(f"GateSettings.floor_quantile must be in (0, 0.5) or None, got {self.floor_quantile!r}")
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"GateSettings.confidence must be in [0.5, 1), got {self.confidence!r}")


def compare_to_baseline(
    measurement: Measurement,
    baseline: BaselineEntry | None,
    environment: Environment,
    settings: GateSettings,
    *,
    other_class_baselines: Sequence[BaselineEntry] = (),
) -> tuple[Comparison, ...]:
    """Time, peak memory and every Metric of ``measurement`` against ``baseline``."""
    not_comparable = _not_comparable_note(baseline, environment, other_class_baselines)
    comparable = baseline if not_comparable is None else None
    out = [_compare_time(measurement, baseline, comparable, not_comparable, settings)]
    memory = _compare_memory(measurement, comparable, settings)
    if memory is not None:
        out.append(memory)
    out.extend(_compare_metric(measurement, m, comparable, not_comparable) for m in measurement.metrics)
    return tuple(out)


def _not_comparable_note(
    baseline: BaselineEntry | None,
    environment: Environment,
    other_class_baselines: Sequence[BaselineEntry],
) -> str | None:
    here = environment.device_class
    if baseline is not None:
        there = baseline.environment.device_class if baseline.environment else None
        if there is None or there == here:
            return None
        classes = [there]
    else:
        classes = sorted(
            {b.environment.device_class for b in other_class_baselines if b.environment} - {here}
        )
        if not classes:
            return None
    return (
        f"baseline recorded on device class {', '.join(classes)}, this run is {here}: "
        f"not comparable (record one here with --gpuperf-update; --gpuperf-strict makes this fail)"
    )


def _calibration_scale(
    measurement: Measurement, baseline: BaselineEntry, settings: GateSettings
) -> tuple[float, str]:
    """Factor that puts current times at the baseline's machine speed, and what to say about it."""
    cur, base = measurement.calibration_ns, baseline.calibration_ns
    if not settings.use_calibration or not cur or not base:
        return 1.0, ""
    scale = base / cur
    if not _CALIBRATION_SANE[0] <= scale <= _CALIBRATION_SANE[1]:
        return 1.0, f"calibration ratio {scale:.2f} out of range, not normalized"
    return scale, f"calibration-normalized (calibration time x{1 / scale:.3f} vs baseline)"


def _compare_time(
    measurement: Measurement,
    baseline: BaselineEntry | None,
    comparable: BaselineEntry | None,
    not_comparable: str | None,
    settings: GateSettings,
) -> Comparison:
    metric = f"time.{settings.metric}"
    current = measurement.stats.get(settings.metric)
    commit = baseline.provenance.commit if baseline is not None else None
    if not_comparable is not None:
        return Comparison(
            measurement.key, metric, Verdict.NOT_COMPARABLE, current,
            baseline=baseline.stats.get(settings.metric) if baseline else None,
            baseline_commit=commit, note=not_comparable,
        )  # fmt: skip
    if comparable is None:
        return Comparison(measurement.key, metric, Verdict.NEW, current, note="no baseline")

    base_value = comparable.stats.get(settings.metric)
    scale, cal_note = _calibration_scale(measurement, comparable, settings)
    scaled = [s * scale for s in measurement.samples_ns]
    base_samples = comparable.samples_ns or (base_value,)
    change = current * scale / base_value - 1.0 if base_value > 0 else math.inf
    ratio, low, high = stats.ratio_of_medians_ci(scaled, base_samples, settings.confidence)
    p = stats.mann_whitney_p(scaled, base_samples) if len(base_samples) > 1 else None
    base_noise = comparable.noise
    if base_noise is None:
        base_noise = stats.between_run_noise(comparable.round_medians_ns)
    cur_noise = stats.between_run_noise(measurement.round_medians_ns)
    floor = stats.noise_floor(base_noise, cur_noise, settings.noise_multiplier)
    threshold = max(settings.threshold, floor)

    evidence = evidence_string(ratio, low, high, settings.confidence, p, cal_note)
    notes = []
    if floor > settings.threshold:
        notes.append(f"threshold raised from {settings.threshold:.1%} to {threshold:.1%} by run-to-run noise")
    verdict = time_verdict(change, low, high, threshold)
    if verdict is not Verdict.UNCHANGED and scale != 1.0:
        raw_change = (change + 1.0) / scale - 1.0  # before normalization
        verdict, calibration_note = _calibration_check(verdict, raw_change, scale, threshold)
        if calibration_note:
            notes.append(calibration_note)
    if verdict is not Verdict.UNCHANGED and settings.floor_quantile is not None:
        verdict, floor_note = _floor_check(verdict, scaled, base_samples, threshold, settings.floor_quantile)
        if floor_note:
            notes.append(floor_note)
    if measurement.unstable_reason:
        notes.insert(0, f"unstable: {measurement.unstable_reason}")
        verdict = Verdict.UNSTABLE
    return Comparison(
        measurement.key, metric, verdict, current,
        baseline=base_value, change=change, ci_low=low, ci_high=high, p_value=p,
        threshold=threshold, evidence=evidence, baseline_commit=commit, note="; ".join(notes),
    )  # fmt: skip


def _calibration_check(verdict: Verdict, raw_change: float, scale: float, threshold: float) -> tuple[Verdict, str]:
    """Calibration may explain a change away, never make one: the raw change must agree.

    The calibration workload carries its own per-process offset (memory layout), and
    the machine's speed changes in steps that the calibration rounds and the test's
    rounds need not share. On the 2-core runner a baseline-mode false alarm read
    +2.6% raw and +11.0% normalized (calibration 7.5% faster than at the baseline).
    A machine that is slower now still has its regressions normalized away; only a
    verdict that exists *because* of normalization (its raw change on the other side
    of the threshold) is dropped.
    """
    made_by_scaling = (
        (verdict is Verdict.REGRESSION and scale > 1.0 and raw_change <= threshold)
        or (verdict is Verdict.IMPROVEMENT and scale < 1.0 and raw_change >= -threshold)
    )
    if not made_by_scaling:
        return verdict, ""
    return Verdict.UNCHANGED, (
        f"{raw_change:+.1%} before calibration: only the normalization (calibration time x{1 / scale:.3f}) "
        f"took it past {threshold:.1%}, and calibration may only explain a change away"
    )


def _floor_check(
    verdict: Verdict, current: Sequence[float], base: Sequence[float], threshold: float, quantile: float
) -> tuple[Verdict, str]:
    """Keep a time verdict only if the fast end of the distribution moved too.

    More work makes every call slower, the fastest ones included; CPU contention
    (other processes, preemption inside a sample) inflates the median and the
    tail while the fastest calls keep their speed. On the 2-core machine under
    load, the median of one workload varied 6.6-14.4 ms across processes while
    its 5th percentile stayed within 2.31-2.41 ms. So a change must also show at
    the ``quantile`` by at least half the threshold.
    """
    if len(current) < 10 or len(base) < 10:
        return verdict, ""
    q = 100 * quantile
    floor_change = float(np.percentile(current, q) / np.percentile(base, q)) - 1.0
    needed = threshold / 2
    moved = floor_change > needed if verdict is Verdict.REGRESSION else floor_change < -needed
    if moved:
        return verdict, ""
    return Verdict.UNCHANGED, (
        f"the fastest {quantile:.0%} of calls moved only {floor_change:+.1%} (needs {needed:.1%}): "
        "contention on the machine, not a change in work"
    )


def time_verdict(change: float, ci_low: float, ci_high: float, threshold: float) -> Verdict:
    """Large enough (|change| > threshold) and significant (CI of the ratio excludes 1).

    Shared with the compare-ref engine."""
    if change > threshold and ci_low > 1.0:
        return Verdict.REGRESSION
    if change < -threshold and ci_high < 1.0:
        return Verdict.IMPROVEMENT
    return Verdict.UNCHANGED


def evidence_string(
    ratio: float, low: float, high: float, confidence: float, p: float | None, extra: str = ""
) -> str:
    """``ratio 1.52 [1.47, 1.58] 95% CI, p=1e-12`` (shared with the compare-ref engine)."""
    parts = [f"ratio {ratio:.3f} [{low:.3f}, {high:.3f}] {confidence:.0%} CI"]
    if p is not None:
        parts.append(stats.format_p(p))
    if extra:
        parts.append(extra)
    return ", ".join(parts)


def _compare_memory(
    measurement: Measurement, baseline: BaselineEntry | None, settings: GateSettings
) -> Comparison | None:
    current = measurement.peak_allocated_bytes
    if current is None:
        return None
    metric = "memory.peak_allocated"
    if baseline is None or baseline.peak_allocated_bytes is None:
        return Comparison(measurement.key, metric, Verdict.NEW, float(current), unit="B", note="no baseline")
    base = baseline.peak_allocated_bytes
    diff = current - base
    change = diff / base if base > 0 else (math.inf if diff > 0 else 0.0)
    verdict = Verdict.UNCHANGED
    if abs(diff) >= settings.memory_min_increase_bytes and abs(change) > settings.memory_threshold:
        verdict = Verdict.REGRESSION if diff > 0 else Verdict.IMPROVEMENT
    return Comparison(
        measurement.key, metric, verdict, float(current),
        baseline=float(base), unit="B", change=change, threshold=settings.memory_threshold,
        evidence=f"peak allocated {base} -> {current} bytes ({diff:+d})",
        baseline_commit=baseline.provenance.commit,
    )  # fmt: skip


def _compare_metric(
    measurement: Measurement,
    metric: Metric,
    baseline: BaselineEntry | None,
    not_comparable: str | None,
) -> Comparison:
    name = f"metric.{metric.name}"
    key = measurement.key
    base_metric = _baseline_metric(baseline, metric.name)
    bound = bound_violation(metric)
    if bound is not None:
        # the description says what the number is about (a graph break's reason, the compile mode)
        return Comparison(
            key, name, Verdict.REGRESSION, metric.value, unit=metric.unit, evidence=bound,
            baseline=base_metric.value if base_metric is not None else None, note=metric.description,
            baseline_commit=baseline.provenance.commit if baseline else None,
        )  # fmt: skip
    if base_metric is None:
        if not_comparable is not None:
            return Comparison(key, name, Verdict.NOT_COMPARABLE, metric.value, unit=metric.unit,
                              note=not_comparable)  # fmt: skip
        return Comparison(key, name, Verdict.NEW, metric.value, unit=metric.unit, note="no baseline value")
    base = base_metric.value
    commit = baseline.provenance.commit if baseline else None
    # positive "worse" means a change in the bad direction
    worse = (base - metric.value) if metric.better == "higher" else (metric.value - base)
    change = (metric.value - base) / abs(base) if base != 0 else None
    verdict, threshold, evidence = _metric_verdict(metric, worse, base)
    return Comparison(
        key, name, verdict, metric.value, baseline=base, unit=metric.unit, change=change,
        threshold=threshold, evidence=evidence, baseline_commit=commit,
        note=metric.description if verdict is Verdict.REGRESSION else "",
    )  # fmt: skip


def _baseline_metric(baseline: BaselineEntry | None, name: str) -> Metric | None:
    if baseline is None:
        return None
    return next((m for m in baseline.metrics if m.name == name), None)


def bound_violation(metric: Metric) -> str | None:
    """What hard bound ``metric`` breaks (None: within them); checked with or without a baseline."""
    if metric.minimum is not None and metric.value < metric.minimum:
        return f"{metric.name} = {metric.value:g}{metric.unit} is below its minimum {metric.minimum:g}"
    if metric.maximum is not None and metric.value > metric.maximum:
        return f"{metric.name} = {metric.value:g}{metric.unit} is above its maximum {metric.maximum:g}"
    return None


def _metric_verdict(metric: Metric, worse: float, base: float) -> tuple[Verdict, float | None, str]:
    """Absolute tolerance first (counts such as graph breaks), else relative tolerance."""
    direction = f"{metric.better} is better"
    if metric.absolute_tolerance is not None:
        tol = metric.absolute_tolerance
        text = f"{base:g} -> {metric.value:g} (allowed worsening {tol:g}, {direction})"
        if worse > tol:
            return Verdict.REGRESSION, None, text
        return (Verdict.IMPROVEMENT if worse < 0 else Verdict.UNCHANGED), None, text
    if metric.tolerance is None:
        return Verdict.UNCHANGED, None, f"{base:g} -> {metric.value:g} (bounds only)"
    tol = metric.tolerance
    text = f"{base:g} -> {metric.value:g} (tolerance {tol:.1%}, {direction})"
    if base == 0:
        # no relative change from zero: any move counts in its direction
        if worse > 0:
            return Verdict.REGRESSION, tol, text
        return (Verdict.IMPROVEMENT if worse < 0 else Verdict.UNCHANGED), tol, text
    rel_worse = worse / abs(base)
    if rel_worse > tol:
        return Verdict.REGRESSION, tol, text
    if rel_worse < -tol:
        return Verdict.IMPROVEMENT, tol, text
    return Verdict.UNCHANGED, tol, text
