"""benchmarks/detection.py's paired wall-time ratios and benchmarks/detection_plan.py's simulation."""

from __future__ import annotations

import random

from benchmark_scripts import benchmark_script


def test_each_session_is_divided_by_the_pytest_benchmark_session_of_its_trial_and_level() -> None:
    with benchmark_script("detection") as detection:
        s = detection.Session
        sessions = [
            s("gpuperf-ref", 0, 0, False, 0, 12.0), s("pytest-benchmark", 0, 0, False, 0, 6.0),
            s("gpuperf-ref", 0, 5, True, 1, 30.0), s("pytest-benchmark", 0, 5, True, 1, 10.0),
            s("gpuperf-ref", 1, 0, False, 0, 9.0), s("pytest-benchmark", 1, 0, True, 1, 9.0),
            s("gpuperf-ref", 1, 5, False, 0, 20.0), s("pytest-benchmark", 1, 5, True, 1, 5.0),  # missed: not counted
        ]  # fmt: skip
        assert detection.paired_ratios(sessions, "gpuperf-ref", confirming=False) == [2.0, 1.0]
        assert detection.paired_ratios(sessions, "gpuperf-ref", confirming=True) == [3.0]
        lines = detection.paired_lines(sessions)
        assert lines == [
            "Paired wall time of gpuperf-ref over pytest-benchmark's, median: "
            "unchanged 1.50x (n=2, 1.00-2.00); confirming a regression 3.00x (n=1, 3.00-3.00)"
        ]


def test_the_simulated_plan_confirms_a_large_change_in_few_pairs_and_clears_no_change() -> None:
    with benchmark_script("detection_plan") as plan:
        rng = random.Random(3)
        large = [plan.simulate(0.10, 0.01, 12, 0.02, rng, error=0.005) for _ in range(50)]
        none = [plan.simulate(0.0, 0.01, 12, 0.02, rng, error=0.005) for _ in range(50)]
        beyond, within = plan.Outcome.BEYOND, plan.Outcome.WITHIN
    assert all(r.outcome is beyond for r in large) and max(r.pairs for r in large) <= 6
    assert all(r.outcome is within for r in none) and all(r.pairs >= 3 for r in none)
    assert all(0 < r.detectable < 0.05 for r in large + none)


def test_the_simulated_sessions_catch_slowdowns_past_the_threshold_and_none_of_unchanged_code() -> None:
    import argparse

    with benchmark_script("detection_plan") as plan:
        args = argparse.Namespace(
            pairs=12, threshold=0.02, spread=0.0073, pair_error=0.005, session_offset=0.0, confidence=0.95,
            tests=4, first_spread=0.011, round_error=0.004, screen_share=0.5,
        )  # fmt: skip
        rng = random.Random(5)
        unchanged = [plan.session(0.0, args, rng) for _ in range(30)]
        slowed = [plan.session(0.10, args, rng) for _ in range(30)]
    assert sum(s.caught for s in unchanged) == 0
    assert sum(s.caught for s in slowed) == 4 * 30
