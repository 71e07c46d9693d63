"""benchmarks/history_detection.py: its scoring and its series, without the other tools."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from benchmark_scripts import benchmark_script

from pytest_gpuperf.history.model import Series, SeriesKey

EMPTY = Series(SeriesKey("t", "default", "time.p50", "cpu", "main"), "ns", "lower", ())


def test_scoring_matches_steps_and_creeps_and_counts_the_rest() -> None:
    with benchmark_script("history_detection") as bench:
        flat = bench.Case("flat-0", "flat", EMPTY, noise_sd=0.01)
        step = bench.Case("step-1", "step", EMPTY, steps=[(20, 0.05)], noise_sd=0.01)
        creep = bench.Case("creep-2", "creep", EMPTY, creeps=[(19, 29)], noise_sd=0.01)
        detections = [
            [(30, 31)],  # a false change on a flat series
            [(20, 21), (40, 41)],  # one commit off (found within one), and a false one
            [(22, 23), (25, 26)],  # the creep, and a duplicate inside it
        ]
        s = bench.score([flat, step, creep], detections, tolerance=5)
        assert (s.tp, s.fp, s.fn, s.duplicates) == (2, 2, 0, 1)
        assert (s.flat_clean, s.flat_total) == (0, 1)
        assert (s.big_steps, s.big_steps_within_1) == (1, 1)
        assert (s.creeps, s.creeps_found) == (1, 1)
        assert s.precision == 0.5 and s.recall == 1.0
        assert s.by_size == {0.05: [1, 1]}
        assert s.fp_by_kind == {"flat": 1, "step": 1, "creep": 0}

        missed = bench.score([step], [[(30, 31)]], tolerance=5)
        assert (missed.tp, missed.fp, missed.fn, missed.big_steps_within_1) == (0, 1, 1, 0)


def test_the_series_carry_the_recorded_noise_and_the_planted_changes() -> None:
    with benchmark_script("history_detection") as bench:
        pools = bench.load_noise(bench.NOISE_FILES)
        assert {p.test for p in pools} == {
            "test_quickstart.py::test_matmul::default",
            "test_quickstart.py::test_mlp_inference::default",
        }
        cases = bench.make_cases(pools, 1.0, seed=1, disturbed=0.0)
        kinds = [c.kind for c in cases]
        assert [kinds.count(k) for k in ("flat", "step", "creep", "long", "fleet")] == [100, 240, 60, 40, 40]
        step = next(c for c in cases if c.kind == "step" and len({p.commit for p in c.series.points}) == 50)
        (at, size), values = step.steps[0], np.array([p.value for p in step.series.points])
        # Each run is the planted level times one recorded session's deviation.
        deviations = np.concatenate([p.deviations for p in pools])
        commit_index = np.array([int(p.commit, 16) for p in step.series.points])
        level = np.where(commit_index >= at, 1e6 * (1 + size), 1e6)
        assert np.all(np.min(np.abs(values[:, None] / level[:, None] - 1 - deviations[None, :]), axis=1) < 1e-9)
        assert Path(bench.NOISE_FILES[0]).exists()
        # A fleet series: runner 2 joins later and reads apart by its offset.
        fleet = next(c for c in cases if c.kind == "fleet")
        first = {}
        for p in fleet.series.points:
            first.setdefault(p.runner, int(p.commit, 16))
        assert first["runner-0"] == first["runner-1"] == 0 and 10 <= first["runner-2"] <= 20
