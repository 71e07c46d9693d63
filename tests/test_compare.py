from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from pytest_gpuperf.compare import GateSettings, compare_to_baseline
from pytest_gpuperf.model import (
    BaselineEntry,
    Environment,
    Measurement,
    Metric,
    Provenance,
    SampleStats,
    Verdict,
)

ENV = Environment(device_class="cpu-test", device_type="cpu", device_name="cpu", cpu_model="t", python="3")
OTHER = Environment(device_class="cuda-h100", device_type="cuda", device_name="H100", cpu_model="t", python="3")


def samples(median: float, rel_sd: float = 0.01, n: int = 300, seed: int = 0) -> tuple[float, ...]:
    return tuple(np.random.default_rng(seed).normal(median, median * rel_sd, n))


def rounds(median: float, rel_sd: float, seed: int = 0) -> tuple[float, ...]:
    return tuple(np.random.default_rng(seed + 100).normal(median, median * rel_sd, 8))


def measurement(median: float = 1000.0, **kw: object) -> Measurement:
    fields: dict[str, object] = {
        "test_id": "t.py::test_a", "name": "default", "samples_ns": samples(median, seed=1),
        "calls_per_sample": 1, "device": "cpu", "timer": "perf_counter",
        "round_medians_ns": rounds(median, 0.002, 1),
    }  # fmt: skip
    fields.update(kw)
    return Measurement(**fields)  # type: ignore[arg-type]


def entry(median: float = 1000.0, env: Environment = ENV, **kw: object) -> BaselineEntry:
    data = samples(median, seed=2)
    fields: dict[str, object] = {
        "key": "t.py::test_a::default", "stats": SampleStats.from_samples(data), "samples_ns": data,
        "calls_per_sample": 1, "device": "cpu", "timer": "perf_counter", "environment": env,
        "provenance": Provenance(commit="abc123"),
    }  # fmt: skip
    fields.update(kw)
    return BaselineEntry(**fields)  # type: ignore[arg-type]


def time_of(comparisons: tuple) -> object:  # type: ignore[type-arg]
    return next(c for c in comparisons if c.metric.startswith("time."))


S = GateSettings()


def test_no_baseline_is_new() -> None:
    (c,) = compare_to_baseline(measurement(), None, ENV, S)
    assert c.verdict is Verdict.NEW and c.metric == "time.p50"


def test_unchanged_within_threshold() -> None:
    c = time_of(compare_to_baseline(measurement(1020.0), entry(1000.0), ENV, S))
    assert c.verdict is Verdict.UNCHANGED
    assert c.change == pytest.approx(0.02, abs=0.005)
    assert c.threshold == pytest.approx(0.10)
    assert c.baseline_commit == "abc123"


def test_large_significant_slowdown_is_a_regression_with_evidence() -> None:
    c = time_of(compare_to_baseline(measurement(1500.0), entry(1000.0), ENV, S))
    assert c.verdict is Verdict.REGRESSION
    assert c.ci_low is not None and c.ci_low > 1.0
    assert c.evidence.startswith("ratio 1.5") and "95% CI" in c.evidence and "p=" in c.evidence


def test_large_speedup_is_an_improvement() -> None:
    c = time_of(compare_to_baseline(measurement(700.0), entry(1000.0), ENV, S))
    assert c.verdict is Verdict.IMPROVEMENT


def test_change_above_threshold_without_significance_is_not_a_regression() -> None:
    noisy = tuple(np.random.default_rng(3).lognormal(np.log(1000), 0.6, 8))
    m = measurement(samples_ns=tuple(s * 1.2 for s in noisy))
    base = entry(samples_ns=noisy, stats=SampleStats.from_samples(noisy))
    c = time_of(compare_to_baseline(m, base, ENV, S))
    assert c.change == pytest.approx(0.2, abs=0.01)
    assert c.ci_low is not None and c.ci_low <= 1.0
    assert c.verdict is Verdict.UNCHANGED


def test_noise_floor_raises_the_threshold() -> None:
    m = measurement(1150.0, round_medians_ns=rounds(1150.0, 0.05, 1))
    base = entry(1000.0, noise=0.05)
    c = time_of(compare_to_baseline(m, base, ENV, S))
    # 3 sigma of sqrt(2) * ~5% run-to-run noise is above the 10% threshold
    assert c.threshold is not None and c.threshold > 0.15
    assert c.verdict is Verdict.UNCHANGED
    assert "raised" in c.note
    quiet = time_of(compare_to_baseline(measurement(1150.0), entry(1000.0, noise=0.001), ENV, S))
    assert quiet.verdict is Verdict.REGRESSION and quiet.threshold == pytest.approx(0.10)


def test_contention_that_leaves_the_fastest_calls_alone_is_not_a_regression() -> None:
    base = samples(1000.0, seed=2)
    rng = np.random.default_rng(5)
    # a loaded machine: 60% of the samples were preempted and took 2-4x as long
    loaded = tuple(s * (rng.uniform(2, 4) if rng.random() < 0.6 else 1.0) for s in samples(1000.0, seed=1))
    c = time_of(compare_to_baseline(measurement(samples_ns=loaded), entry(samples_ns=base), ENV, S))
    assert c.change is not None and c.change > 0.5
    assert c.verdict is Verdict.UNCHANGED and "contention" in c.note
    off = time_of(compare_to_baseline(measurement(samples_ns=loaded), entry(samples_ns=base), ENV,
                                      GateSettings(floor_quantile=None)))  # fmt: skip
    assert off.verdict is Verdict.REGRESSION


def test_calibration_normalizes_a_uniformly_slower_machine() -> None:
    m = measurement(1200.0, calibration_ns=600.0)  # everything 20% slower today
    base = entry(1000.0, calibration_ns=500.0)
    c = time_of(compare_to_baseline(m, base, ENV, S))
    assert c.verdict is Verdict.UNCHANGED and "calibration-normalized" in c.evidence
    raw = time_of(compare_to_baseline(m, base, ENV, GateSettings(use_calibration=False)))
    assert raw.verdict is Verdict.REGRESSION


def test_calibration_never_makes_a_regression_the_raw_times_do_not_show() -> None:
    # raw +2.6%; the calibration workload ran 7.5% faster than at the baseline
    m = measurement(1026.0, calibration_ns=462.5)
    base = entry(1000.0, calibration_ns=500.0)
    c = time_of(compare_to_baseline(m, base, ENV, S))
    assert c.change is not None and c.change > 0.10  # what the normalization alone says
    assert c.verdict is Verdict.UNCHANGED
    assert "+2.6% before calibration" in c.note
    # the same normalization on a raw change past the threshold keeps the regression
    worse = time_of(compare_to_baseline(measurement(1150.0, calibration_ns=462.5), base, ENV, S))
    assert worse.verdict is Verdict.REGRESSION


def test_calibration_never_makes_an_improvement_the_raw_times_do_not_show() -> None:
    # raw -2.6%; the calibration workload ran 10% slower than at the baseline
    base = entry(1000.0, calibration_ns=500.0)
    c = time_of(compare_to_baseline(measurement(974.0, calibration_ns=550.0), base, ENV, S))
    assert c.change is not None and c.change < -0.10
    assert c.verdict is Verdict.UNCHANGED
    assert "-2.6% before calibration" in c.note
    better = time_of(compare_to_baseline(measurement(850.0, calibration_ns=550.0), base, ENV, S))
    assert better.verdict is Verdict.IMPROVEMENT


def test_a_single_sample_gives_an_unknown_interval_that_reports_can_store() -> None:
    # An 11 s DataLoader epoch on the H100 host fitted one sample in its time budget.
    one = measurement(2000.0, samples_ns=(2000.0,), round_medians_ns=(2000.0,))
    c = time_of(compare_to_baseline(one, entry(1000.0), ENV, S))
    assert c.ci_low is None and c.ci_high is None
    assert c.verdict is Verdict.UNCHANGED  # a doubling, but one sample is no evidence
    json.dumps(dataclasses.asdict(c), allow_nan=False)


def test_other_device_class_is_not_comparable() -> None:
    c = time_of(compare_to_baseline(measurement(5000.0), entry(1000.0, env=OTHER), ENV, S))
    assert c.verdict is Verdict.NOT_COMPARABLE
    assert "cuda-h100" in c.note and "cpu-test" in c.note and "--gpuperf-strict" in c.note
    only_other = time_of(compare_to_baseline(measurement(), None, ENV, S, other_class_baselines=[entry(env=OTHER)]))
    assert only_other.verdict is Verdict.NOT_COMPARABLE


def test_unstable_measurement_is_never_a_regression() -> None:
    c = time_of(compare_to_baseline(measurement(3000.0, unstable_reason="thermal throttling"), entry(), ENV, S))
    assert c.verdict is Verdict.UNSTABLE and "thermal" in c.note


def test_other_time_metric() -> None:
    c = time_of(compare_to_baseline(measurement(1500.0), entry(), ENV, GateSettings(metric="mean")))
    assert c.metric == "time.mean" and c.verdict is Verdict.REGRESSION


def test_memory_threshold_and_absolute_floor() -> None:
    mib = 1 << 20
    comps = compare_to_baseline(measurement(peak_allocated_bytes=120 * mib), entry(peak_allocated_bytes=100 * mib),
                                ENV, S)  # fmt: skip
    mem = next(c for c in comps if c.metric == "memory.peak_allocated")
    assert mem.verdict is Verdict.REGRESSION and mem.change == pytest.approx(0.2)
    tiny = compare_to_baseline(measurement(peak_allocated_bytes=2000), entry(peak_allocated_bytes=1000), ENV, S)
    assert next(c for c in tiny if c.metric.startswith("memory")).verdict is Verdict.UNCHANGED
    none = compare_to_baseline(measurement(peak_allocated_bytes=None), entry(peak_allocated_bytes=10), ENV, S)
    assert not [c for c in none if c.metric.startswith("memory")]


def _metric_verdict(current: Metric, base: Metric | None) -> Verdict:
    comps = compare_to_baseline(
        measurement(metrics=(current,)), entry(metrics=(base,) if base else ()), ENV, S
    )
    return next(c for c in comps if c.metric == f"metric.{current.name}").verdict


def test_metrics_relative_absolute_bounds_and_direction() -> None:
    assert _metric_verdict(Metric("speedup", 1.5), Metric("speedup", 2.0)) is Verdict.REGRESSION
    assert _metric_verdict(Metric("speedup", 1.95), Metric("speedup", 2.0)) is Verdict.UNCHANGED
    assert _metric_verdict(Metric("speedup", 2.5), Metric("speedup", 2.0)) is Verdict.IMPROVEMENT
    assert _metric_verdict(Metric("lat", 1.5, better="lower"), Metric("lat", 1.0, better="lower")) is Verdict.REGRESSION
    breaks = Metric("graph_breaks", 1, better="lower", absolute_tolerance=0)
    assert _metric_verdict(breaks, Metric("graph_breaks", 0)) is Verdict.REGRESSION
    assert _metric_verdict(Metric("graph_breaks", 0, better="lower", absolute_tolerance=0),
                           Metric("graph_breaks", 0)) is Verdict.UNCHANGED  # fmt: skip
    assert _metric_verdict(Metric("speedup", 3.0), None) is Verdict.NEW
    assert _metric_verdict(Metric("speedup", 0.5, minimum=1.0), None) is Verdict.REGRESSION
    assert _metric_verdict(Metric("frac", 1.2, maximum=1.0), Metric("frac", 1.2)) is Verdict.REGRESSION


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="threshold"):
        GateSettings(threshold=-0.1)
    with pytest.raises(ValueError, match="floor_quantile"):
        GateSettings(floor_quantile=0.7)
    with pytest.raises(ValueError, match="confidence"):
        GateSettings(confidence=1.0)
