"""benchmarks/history_events.py: its series (recorded noise, outlier runs, five statistics) and its scoring."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from benchmark_scripts import benchmark_script

from pytest_gpuperf.history.model import Point, Series


def test_the_series_carry_five_statistics_outlier_runs_and_the_planted_changes() -> None:
    with benchmark_script("history_events") as bench:
        pools = bench.load_noise(bench.NOISE_FILES)
        cases = bench.make_cases(pools, 1)
        assert [sum(c.kind == k for c in cases) for k in ("flat", "step", "creep")] == [100, 120, 30]
        for case in cases:
            assert [s.key.statistic for s in case.series] == ["time.p50", "time.mean", "time.min", "time.p90",
                                                               "time.p99"]  # fmt: skip
            assert 0.005 <= case.noise <= 0.03
            p50 = case.series[0]
            assert all(p.ci_low is not None for p in p50.points)  # the gated statistic has its interval
            assert all(p.ci_low is None for s in case.series[1:] for p in s.points)
        # outlier runs: slowed as a whole, so every statistic of the run reads high together
        flat = [c for c in cases if c.kind == "flat"]
        ratios = np.array([[p.value / 1e6 for p in c.series[0].points] for c in flat])
        assert 0.005 < float(np.mean(ratios > 1.09)) < 0.05
        steps = [c for c in cases if c.kind == "step"]
        assert all(8 <= at <= 42 for c in steps for at, _ in c.steps)
        assert bench.DetectorConfig() == bench.FROZEN  # the defaults, not tuned per run


def test_scoring_counts_events_flat_series_big_steps_and_gradual_creeps() -> None:
    with benchmark_script("history_events") as bench:
        flat = bench.Case("flat-0", "flat", [])
        step = bench.Case("step-1", "step", [], steps=[(20, 0.05)], noise=0.01)
        creep = bench.Case("creep-2", "creep", [], creeps=[(19, 29)], noise=0.01, separable=[True])
        detections = [[(30, 31, False)], [(21, 22, False), (40, 41, False)], [(20, 29, True)]]
        s = bench.score([flat, step, creep], detections, tolerance=2)
        assert (s.tp, s.fp, s.fn, s.flat_dirty, s.big, s.big_missed, s.big_off) == (2, 2, 0, 1, 1, 0, 1)
        assert (s.creeps, s.creeps_gradual) == (1, 1)
        assert s.f1 == 2 * 2 / (2 * 2 + 2 + 0)
        missed = bench.score([step], [[(25, 26, False)]], tolerance=2)
        assert (missed.tp, missed.fn, missed.big_missed) == (0, 1, 1)


def test_misses_name_big_steps_found_off_and_flat_series_with_a_change() -> None:
    with benchmark_script("history_events") as bench:
        cases = bench.make_cases(bench.load_noise(bench.NOISE_FILES), 1)
        flat = next(c for c in cases if c.kind == "flat")
        big = next(c for c in cases if c.kind == "step" and abs(c.steps[0][1]) >= 3 * c.noise)
        at = big.steps[0][0]
        lines = bench.misses([flat, big, big], [[(3, 4, False)], [(at + 1, at + 2, False)], [(at, at + 1, False)]])
        assert len(lines) == 2
        assert lines[0].startswith(f"  flat series {flat.name} ") and lines[1].startswith(f"  step {big.name} ")


def test_a_creep_is_separable_only_where_its_levels_lie_far_from_any_single_step() -> None:
    with benchmark_script("history_events") as bench:
        step = np.full(50, 1e6)
        step[20:] *= 1.10
        assert bench.creep_separation(step, 0.01) < 1e-6  # a step is its own best step
        creep = np.full(50, 1e6)
        creep[20:30] *= 1.01 ** np.arange(1, 11)
        creep[30:] = creep[29]
        at_1 = bench.creep_separation(creep, 0.01)
        assert 60 < at_1 < 80  # ten commits of 1% at 1% noise: far from any step
        assert bench.creep_separation(creep, 0.02) == pytest.approx(at_1 / 4)  # falls with the noise squared
        assert bench.creep_separation(creep, 0.03) < bench.SEPARABLE  # at 3% noise no test tells it from a step
        cases = bench.make_cases(bench.load_noise(bench.NOISE_FILES), 1)
        creeps = [c for c in cases if c.kind == "creep"]
        assert all(len(c.separable) == len(c.creeps) == 1 for c in creeps)
        assert 0 < sum(c.separable[0] for c in creeps) < len(creeps)  # some creeps are steps to any detector
        assert all(c.separable[0] for c in creeps if c.noise < 0.015)


def test_gradual_creeps_are_counted_over_all_creeps_and_over_the_separable_ones() -> None:
    with benchmark_script("history_events") as bench:
        near = bench.Case("creep-0", "creep", [], creeps=[(19, 29)], noise=0.01, separable=[True])
        far = bench.Case("creep-1", "creep", [], creeps=[(19, 29)], noise=0.03, separable=[False])
        s = bench.score([near, far, far], [[(20, 29, True)], [(24, 25, False)], [(20, 29, True)]], tolerance=2)
        assert (s.creeps, s.creeps_gradual, s.separable, s.separable_gradual) == (3, 2, 1, 1)
        lines = bench.misses([near, far], [[(24, 25, False)], [(24, 25, False)]])
        assert lines == ["  creep creep-0 19~>29 (noise 1.00%), separable: reported as [(24, 25, False)]"]


def test_pending_events_are_no_detections_and_are_counted_apart_on_flat_series() -> None:
    # A flat series whose two newest runs are slowed by 30%: its finding is pending (a level of
    # two runs at the series' end), so the scoring sees no detection and counts the series apart.
    with benchmark_script("history_events") as bench:
        flat = next(c for c in bench.make_cases(bench.load_noise(bench.NOISE_FILES), 1) if c.kind == "flat")
        series = [Series(s.key, s.unit, s.better, (*s.points[:-2], *map(_slowed, s.points[-2:]))) for s in flat.series]
        found, _, flat_pending = bench.run_gpuperf([bench.Case(flat.name, "flat", series, noise=flat.noise)])
        assert (found, flat_pending) == ([[]], 1)


def _slowed(point: Point) -> Point:
    low, high = point.ci_low, point.ci_high
    return dataclasses.replace(
        point,
        value=point.value * 1.3,
        ci_low=None if low is None else low * 1.3,
        ci_high=None if high is None else high * 1.3,
    )
