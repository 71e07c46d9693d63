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
        large = [plan.simulate(0.10, 0.01, 6, 0.02, rng) for _ in range(50)]
        none = [plan.simulate(0.0, 0.01, 6, 0.02, rng) for _ in range(50)]
    assert all(hit for hit, _ in large) and max(n for _, n in large) <= 5
    assert not any(hit for hit, _ in none) and all(n >= 3 for _, n in none)
