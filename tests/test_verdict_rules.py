"""The verdict pipeline's rules, each on its own case, judged through the real pipeline (verdict/)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from pytest_gpuperf.baseline.record import recorded_correction
from pytest_gpuperf.config import GateSettings
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.model import (
    Comparison,
    Kind,
    Measurement,
    Metric,
    SampleStats,
    Scheduling,
    Statistic,
    Verdict,
    WaitSource,
)
from tests.verdict_helpers import OTHER, compare, entry, measurement, rounds, rules_that_acted, samples, time_of


def test_no_baseline_is_new() -> None:
    (c,) = compare(measurement(), None)
    assert c.verdict is Verdict.NEW and c.metric == "time.p50"


def test_unchanged_within_threshold() -> None:
    c = time_of(compare(measurement(1020.0), entry(1000.0)))
    assert c.verdict is Verdict.UNCHANGED
    assert c.change == pytest.approx(0.02, abs=0.005)
    assert c.threshold == pytest.approx(0.10)
    assert c.baseline_commit == "abc123"


def test_large_significant_slowdown_is_a_regression_with_evidence() -> None:
    c = time_of(compare(measurement(1500.0), entry(1000.0)))
    assert c.verdict is Verdict.REGRESSION
    assert c.ci_low is not None and c.ci_low > 1.0
    assert c.evidence.startswith("ratio 1.5") and "95% CI" in c.evidence and "p=" in c.evidence


def test_large_speedup_is_an_improvement() -> None:
    c = time_of(compare(measurement(700.0), entry(1000.0)))
    assert c.verdict is Verdict.IMPROVEMENT


def test_change_above_threshold_without_significance_is_not_a_regression() -> None:
    noisy = tuple(np.random.default_rng(3).lognormal(np.log(1000), 0.6, 8))
    m = measurement(samples_ns=tuple(s * 1.2 for s in noisy))
    base = entry(samples_ns=noisy, stats=SampleStats.from_samples(noisy))
    c = time_of(compare(m, base))
    assert c.change == pytest.approx(0.2, abs=0.01)
    assert c.ci_low is not None and c.ci_low <= 1.0
    assert c.verdict is Verdict.UNCHANGED


def test_noise_floor_raises_the_threshold() -> None:
    m = measurement(1150.0, round_medians_ns=rounds(1150.0, 0.05, 1))
    base = entry(1000.0, noise=0.05)
    c = time_of(compare(m, base))
    # 3 sigma of sqrt(2) * ~5% run-to-run noise is above the 10% threshold
    assert c.threshold is not None and c.threshold > 0.15
    assert c.verdict is Verdict.UNCHANGED
    assert "raised" in c.note
    quiet = time_of(compare(measurement(1150.0), entry(1000.0, noise=0.001)))
    assert quiet.verdict is Verdict.REGRESSION and quiet.threshold == pytest.approx(0.10)


def waited(samples_ns: tuple[float, ...], waits: tuple[float, ...], *, longest: tuple[float, ...] | None = None,
           threads: tuple[float, ...] | None = None) -> Scheduling:  # fmt: skip
    """Scheduler accounting in which each sample waited ``waits`` (per call) for a CPU."""
    n = len(samples_ns)
    return Scheduling(WaitSource.SCHEDSTAT, waits, (0.0,) * n, threads or waits, (0.0,) * n, longest or waits, cpus=2)


def busy(median: float, *, wait: float, seed: int = 1, **kw: object) -> Measurement:
    """A measurement whose every sample waited ``wait`` ns for a CPU on top of ``median`` ns of work."""
    work = samples(median, seed=seed)
    wall = tuple(x + wait for x in work)
    return measurement(samples_ns=wall, scheduling=waited(wall, (wait,) * len(wall)),
                       round_medians_ns=rounds(median + wait, 0.002, seed), **kw)  # fmt: skip


def test_contention_the_scheduler_accounted_is_taken_out_and_never_a_regression() -> None:
    # the runner was busy: every call waited as long as it worked, so the wall clock reads +100%
    c = time_of(compare(busy(1000.0, wait=1000.0), entry(1000.0)))
    assert c.change == pytest.approx(1.0, abs=0.03)  # users read the wall clock
    assert c.verdict is Verdict.UNCHANGED and "contention, not a change in work" in c.note
    assert c.correction is not None and abs(c.correction.change) < 0.06 and c.correction.wait_share > 0.45
    assert "contention" in rules_that_acted(c)


def test_a_slowdown_stands_on_a_busy_runner_when_more_than_the_contention_explains() -> None:
    c = time_of(compare(busy(1300.0, wait=1000.0), entry(1000.0)))
    assert c.verdict is Verdict.REGRESSION and "more than the contention explains" in c.note
    # the estimate is the middle of the bracket [wall - 1.05 wait, wall - wait]: (2300 - 1025) / 1000 - 1
    assert c.correction is not None and c.correction.change == pytest.approx(0.275, abs=0.03)


def test_a_baseline_written_under_contention_keeps_its_corrected_samples_for_the_gate() -> None:
    # written while every call waited 1.5 us (60% of its time); gated quiet with 30% more work: the wall clock
    # reads faster
    written = busy(1000.0, wait=1500.0, seed=2)
    base = entry(samples_ns=written.samples_ns, correction=recorded_correction(written))
    c = time_of(compare(measurement(1300.0), base))
    assert c.change is not None and c.change < -0.4  # the wall clock: "faster"
    assert c.verdict is Verdict.REGRESSION and "the wall clock's" in c.note and "hid it" in c.note


def test_a_change_only_the_correction_shows_is_not_judged_where_a_side_waited_most_of_its_time() -> None:
    # written while every call waited 4x its work (80% of the time: the CPU shared with several tasks), gated
    # quiet at the same wall clock: only the correction reads +400%, from a fifth of the baseline's time
    written = busy(1000.0, wait=4000.0, seed=2)
    base = entry(samples_ns=written.samples_ns, correction=recorded_correction(written))
    c = time_of(compare(measurement(5000.0), base))
    assert c.verdict is Verdict.UNSTABLE and "waited most of its time" in c.note


def test_a_correction_too_uncertain_to_rule_out_the_wall_clocks_change_is_unstable() -> None:
    # two threads: one waited 200 ns, both 1200 ns in all, so the call lost 200 to 1200 ns of 2000
    wall = tuple(x + 1000.0 for x in samples(1000.0, seed=1))
    n = len(wall)
    m = measurement(samples_ns=wall, scheduling=waited(wall, (200.0,) * n, longest=(200.0,) * n, threads=(1200.0,) * n))
    c = time_of(compare(m, entry(1000.0)))
    assert c.verdict is Verdict.UNSTABLE and "the correction itself is uncertain" in c.note


def test_too_few_samples_are_not_gated_and_say_so() -> None:
    # a call slower than the time budget allows a verdict on: never silently "unchanged"
    one = measurement(2000.0, samples_ns=(2000.0,), round_medians_ns=(2000.0,))
    c = time_of(compare(one, entry(1000.0)))
    assert c.ci_low is None and c.ci_high is None
    assert c.verdict is Verdict.NOT_GATED and "fewer than the 6" in c.note and "--gpuperf-time-limit" in c.note
    json.dumps(dataclasses.asdict(c), allow_nan=False)
    six = measurement(2000.0, samples_ns=(2000.0, 2010.0, 1990.0, 2005.0, 1995.0, 2002.0))
    assert time_of(compare(six, entry(1000.0))).verdict is Verdict.REGRESSION
    few_base = entry(1000.0, samples_ns=(1000.0, 1001.0, 999.0))
    assert time_of(compare(measurement(2000.0), few_base)).verdict is Verdict.NOT_GATED


def test_other_device_class_is_not_comparable() -> None:
    c = time_of(compare(measurement(5000.0), entry(1000.0, env=OTHER)))
    assert c.verdict is Verdict.NOT_COMPARABLE
    assert "cuda-h100" in c.note and "cpu-test" in c.note and "--gpuperf-strict" in c.note
    only_other = time_of(compare(measurement(), None, others=["cuda-h100"]))
    assert only_other.verdict is Verdict.NOT_COMPARABLE


def test_unstable_measurement_is_never_a_regression() -> None:
    c = time_of(compare(measurement(3000.0, unstable_reason="thermal throttling"), entry()))
    assert c.verdict is Verdict.UNSTABLE and "thermal" in c.note


def test_other_time_metric() -> None:
    c = time_of(compare(measurement(1500.0), entry(), GateSettings(statistic=Statistic.MEAN)))
    assert c.metric == "time.mean" and c.verdict is Verdict.REGRESSION


def test_memory_threshold_and_absolute_floor() -> None:
    mib = 1 << 20
    comps = compare(measurement(peak_allocated_bytes=120 * mib), entry(peak_allocated_bytes=100 * mib),
                       )  # fmt: skip
    mem = next(c for c in comps if c.metric == "memory.peak_allocated")
    assert mem.verdict is Verdict.REGRESSION and mem.change == pytest.approx(0.2)
    tiny = compare(measurement(peak_allocated_bytes=2000), entry(peak_allocated_bytes=1000))
    small = next(c for c in tiny if c.kind is Kind.MEMORY)
    assert small.verdict is Verdict.UNCHANGED and "+1000 B is below the 1.000 MiB floor" in small.note  # it says so
    none = compare(measurement(peak_allocated_bytes=None), entry(peak_allocated_bytes=10))
    assert not [c for c in none if c.kind is Kind.MEMORY]


def _metric_verdict(current: Metric, base: Metric | None) -> Verdict:
    comps = compare(measurement(metrics=(current,)), entry(metrics=(base,) if base else ()))
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


@pytest.mark.parametrize(
    "metric",
    [Metric("acc", float("nan"), minimum=0.5), Metric("acc", float("nan")), Metric("acc", float("inf"), maximum=2.0),
     Metric("acc", 0.9, minimum=float("nan")), Metric("acc", 0.9, maximum=float("inf"))],
)  # fmt: skip
def test_a_metric_or_bound_that_is_not_finite_is_a_regression_never_within_bounds(metric: Metric) -> None:
    (c,) = [c for c in compare(measurement(metrics=(metric,)), entry(metrics=(Metric("acc", 0.9),)))
            if c.kind is Kind.METRIC]  # fmt: skip
    assert c.verdict is Verdict.REGRESSION
    assert rules_that_acted(c) == ["metric-bounds"] and "is not a finite number" in c.note


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="threshold"):
        GateSettings(threshold=-0.1)
    with pytest.raises(ConfigError, match="confidence"):
        GateSettings(confidence=1.0)


def test_every_verdict_carries_the_rules_that_reached_it() -> None:
    c = time_of(compare(measurement(1500.0), entry(1000.0)))
    assert rules_that_acted(c) == ["noise-floor", "significance"]
    assert c.explanation[-1].verdict is Verdict.REGRESSION
    assert "+50.0% is above the threshold 10.0%" in c.explanation[1].note
    new = time_of(compare(measurement(), None))
    assert rules_that_acted(new) == ["reference"] and new.explanation[0].note == "no baseline"


def test_comparisons_have_a_kind() -> None:
    mib = 1 << 20
    comps = compare(measurement(peak_allocated_bytes=mib, metrics=(Metric("speedup", 2.0),)), entry())
    assert [c.kind for c in comps] == [Kind.TIME, Kind.MEMORY, Kind.METRIC]


def test_the_gpu_path_runs_none_of_the_cpu_guards_rules() -> None:
    from pytest_gpuperf.verdict.rulesets import baseline_rules

    loaded = tuple(s * 3 for s in samples(1000.0, seed=1))
    c = time_of(compare(measurement(samples_ns=loaded), entry(), rules=baseline_rules()))
    assert "fast-end" not in rules_that_acted(c) and c.verdict is Verdict.REGRESSION


def test_a_violated_bound_fails_every_mode_by_its_steps_flag_not_a_rules_name() -> None:
    from pytest_gpuperf.model import MeasurementResult
    from pytest_gpuperf.verdict.judge import absolute_failures

    results = compare(measurement(metrics=(Metric("frac", 1.2, maximum=1.0), Metric("speedup", 1.0))),
                      entry(metrics=(Metric("speedup", 2.0),)))  # fmt: skip
    bound = next(c for c in results if c.metric == "metric.frac")
    relative = next(c for c in results if c.metric == "metric.speedup")
    assert bound.verdict is relative.verdict is Verdict.REGRESSION
    assert absolute_failures(MeasurementResult(measurement(), tuple(results))) == (bound,)
    renamed = dataclasses.replace(
        relative, explanation=tuple(dataclasses.replace(n, rule="metric-bounds") for n in relative.explanation)
    )
    assert absolute_failures(MeasurementResult(measurement(), (renamed,))) == ()  # a name decides nothing


def _first_pair(ratio: float, half_width: float, *, confirm_pairs: int) -> Comparison:
    """Compare-ref's first pair read at ``ratio`` with its rounds' interval ``ratio * (1 +- half_width)``."""
    from pytest_gpuperf.config import Mode
    from pytest_gpuperf.verdict import Reference, judge
    from pytest_gpuperf.verdict.case import Evidence
    from tests.verdict_helpers import ENV, cpu_rules

    evidence = Evidence(change=ratio - 1, ratio=ratio, low=ratio * (1 - half_width), high=ratio * (1 + half_width),
                        p_value=0.01, method="rounds", readings=20, reference_readings=20, paired=True)  # fmt: skip
    gate = GateSettings(threshold=0.02, confirm_pairs=confirm_pairs)
    reference = Reference(entry=entry(1000.0), time_evidence=evidence, base_ref="main")
    return time_of(judge(measurement(1000.0), reference, gate, cpu_rules(Mode.COMPARE_REF), ENV).comparisons)


def test_compare_ref_decides_against_the_threshold_with_the_interval_in_three_outcomes() -> None:
    from pytest_gpuperf.verdict.rules import against_threshold

    assert against_threshold(1.025, 1.035, 0.02) is Verdict.REGRESSION
    assert against_threshold(0.995, 1.015, 0.02) is Verdict.UNCHANGED
    assert against_threshold(1.006, 1.038, 0.02) is Verdict.NOT_RESOLVED  # +2.2% [+0.6%, +3.8%]: either side
    assert against_threshold(0.95, 0.97, 0.02) is Verdict.IMPROVEMENT
    assert against_threshold(0.97, 1.01, 0.02) is Verdict.UNCHANGED  # an improvement not shown leaves nothing open


def test_a_change_as_likely_below_the_threshold_as_above_it_is_not_resolved_and_strict_decides() -> None:
    from pytest_gpuperf.verdict.judge import failing

    alone = _first_pair(1.022, 0.016, confirm_pairs=0)  # +2.2% [+0.6%, +3.8%], no fresh pairs to settle it
    assert alone.verdict is Verdict.NOT_RESOLVED
    assert "not resolved against the threshold 2.0%" in alone.note
    assert not failing([alone], strict=False) and failing([alone], strict=True)


def test_the_first_pair_only_screens_what_fresh_pairs_decide() -> None:
    from pytest_gpuperf.verdict.confirmation import suspicion, unconfirmed_verdict

    open_pair = _first_pair(1.022, 0.016, confirm_pairs=12)
    assert suspicion(open_pair) is Verdict.REGRESSION and unconfirmed_verdict(open_pair) is Verdict.NOT_RESOLVED
    past_half = _first_pair(1.013, 0.002, confirm_pairs=12)  # +1.3%: within 2%, but past half of it
    assert suspicion(past_half) is Verdict.REGRESSION and unconfirmed_verdict(past_half) is Verdict.UNCHANGED
    below_half = _first_pair(1.008, 0.002, confirm_pairs=12)
    assert below_half.verdict is Verdict.UNCHANGED and suspicion(below_half) is None
    faster = _first_pair(0.96, 0.005, confirm_pairs=12)
    assert suspicion(faster) is Verdict.IMPROVEMENT
    assert [s.rule for s in past_half.explanation][-2:] == ["against-threshold", "screen"]
