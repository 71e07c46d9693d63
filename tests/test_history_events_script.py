"""benchmarks/history_events.py: its series (recorded noise, outlier runs, five statistics) and its scoring."""

from __future__ import annotations

import numpy as np
from benchmark_scripts import benchmark_script


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
        creep = bench.Case("creep-2", "creep", [], creeps=[(19, 29)], noise=0.01)
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
