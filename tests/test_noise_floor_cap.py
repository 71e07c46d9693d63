"""Recorded noise raises the threshold only up to a cap (NoiseFloor); a change the capped threshold calls but
the noise would not is not gated (NoisyBaseline), and the note says why and what to do."""

from __future__ import annotations

import json

import pytest
from verdict_helpers import compare, entry, judged, measurement, rounds, rules_that_acted, time_of

from pytest_gpuperf.config import GateSettings
from pytest_gpuperf.model import Verdict
from pytest_gpuperf.verdict.judge import fails
from pytest_gpuperf.verdict.rules import NOISE_FLOOR_CAP

BUSY = "CPU pressure 60% of the time, steal 0.0%, 4 runnable tasks on 2 CPUs"


def test_a_baseline_noise_of_095_does_not_raise_the_threshold_to_285_percent() -> None:
    c = time_of(compare(measurement(1500.0), entry(1000.0, noise=0.95)))  # +50%, within the noise
    assert c.threshold == pytest.approx(NOISE_FLOOR_CAP * 0.10)
    assert "threshold raised from 10.0% to 25.0%, capped at 2.5x: the recorded noise (baseline 95.0%" in c.note
    assert "would raise it to 285.0%" in c.note


def test_a_change_within_noise_beyond_the_cap_is_not_gated_and_says_why() -> None:
    c = time_of(compare(measurement(1400.0), entry(1000.0, noise=0.15, written_busy=BUSY)))  # +40%, floor ~45%
    assert c.verdict is Verdict.NOT_GATED
    assert rules_that_acted(c)[-1] == "noisy-baseline"
    assert "this baseline entry cannot gate at 10.0%" in c.note
    assert f"it was written while the runner was busy ({BUSY}): write it again in a quieter hour" in c.note
    assert "--gpuperf-strict makes this fail" in c.note


def test_strict_decides_whether_it_fails() -> None:
    noisy = entry(1000.0, noise=0.15)
    assert not fails(judged(measurement(1400.0), noisy), GateSettings())
    assert fails(judged(measurement(1400.0), noisy, GateSettings(strict=True)), GateSettings(strict=True))


def test_a_noisy_run_is_told_to_measure_again_not_to_rewrite_the_baseline() -> None:
    noisy_now = measurement(1400.0, round_medians_ns=rounds(1400.0, 0.2, 3))
    c = time_of(compare(noisy_now, entry(1000.0, noise=0.01)))
    assert c.verdict is Verdict.NOT_GATED
    assert "this run measured under load" in c.note and "--gpuperf-compare-ref" in c.note


def test_a_change_beyond_even_the_noise_stands() -> None:
    c = time_of(compare(measurement(3000.0), entry(1000.0, noise=0.15)))  # +200%, floor ~45%
    assert c.verdict is Verdict.REGRESSION
    assert "noisy-baseline" not in rules_that_acted(c)


def test_below_the_cap_the_floor_is_the_noise() -> None:
    c = time_of(compare(measurement(1150.0), entry(1000.0, noise=0.05)))
    assert c.threshold is not None and 0.10 < c.threshold < NOISE_FLOOR_CAP * 0.10
    assert "capped" not in c.note


ARGS = ["--gpuperf-warmup-time=0.01", "--gpuperf-min-time=0.03", "--gpuperf-max-time=0.2", "-p", "no:cacheprovider",
        "--gpuperf-busy-policy=judge"]  # fmt: skip


def noisy_baseline_project(pytester: pytest.Pytester, tests: int = 1) -> None:
    """A project whose baselines were written busy: as noisy as an entry may be (100%: a threshold of 300% would
    hold it), and every sample 2.5 times faster than now: +150%, past the cap and within the noise, unless the
    machine's load moves this run by more than 1.6x against the write."""
    body = "".join(f"def test_noop_{i}(gpu_bench):\n    gpu_bench(lambda: sum(range(300)))\n" for i in range(tests))
    pytester.makepyfile(test_b=body)
    pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *ARGS).assert_outcomes(passed=tests)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    document = json.loads(path.read_text())
    for written in document["entries"].values():
        written.update(noise=1.0, written_busy=BUSY)
        written["samples_ns"] = [s / 2.5 for s in written["samples_ns"]]
        written["stats"] = {k: v if k == "count" else v / 2.5 for k, v in written["stats"].items()}
    path.write_text(json.dumps(document))


def test_a_baseline_written_with_high_recorded_noise_does_not_fail_the_run(pytester: pytest.Pytester) -> None:
    noisy_baseline_project(pytester)
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-explain", *ARGS)
    result.assert_outcomes(passed=1)
    explained = "*?noisy-baseline? not gated: +*% is within the recorded noise*cannot gate at 10.0%*"
    result.stdout.fnmatch_lines(["*not gated: +*% is within the recorded noise*", explained])  # notes, then explain
    pytester.runpytest_subprocess("--gpuperf", "--gpuperf-strict", *ARGS).assert_outcomes(failed=1)
