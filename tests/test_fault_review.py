"""Hostile and faulty situations that used to pass silently (issue 29): each now fails, warns or is refused."""

from __future__ import annotations

import pytest

FAST = ["--gpuperf-warmup-time=0.01", "--gpuperf-min-time=0.03", "--gpuperf-max-time=0.2", "-p", "no:cacheprovider"]


def test_update_run_fails_a_violated_hard_bound_and_writes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bound="""
        def test_speedup(gpu_bench):
            gpu_bench(lambda: None)
            gpu_bench.metric("speedup", 0.5, minimum=1.0, tolerance=None)
        """
    )
    result = pytester.runpytest_subprocess("--gpuperf-update-baseline", *FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*speedup = 0.5 is below its minimum 1*"])
    assert not list((pytester.path / "baselines").rglob("*.json"))
