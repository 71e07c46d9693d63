"""The stopping rule shared by every loop of rounds (stopping.py), on plain numbers."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_gpuperf.config import DEFAULT_MIN_SAMPLES, MeasureSettings
from pytest_gpuperf.measure.stopping import (
    LIMIT_MARGIN,
    LONG_CALL_BUDGET_SHARE,
    LONG_SAMPLE_S,
    Progress,
    Stop,
    StoppingRule,
)
from pytest_gpuperf.stats import median_ci

SETTINGS = MeasureSettings(min_time_s=0.2, max_time_s=2.0, target_precision=0.01, time_limit_s=120.0)
RULE = StoppingRule.from_settings(SETTINGS, round_s=0.1, min_rounds=3, precision_samples=10, max_samples=20_000)


def never_precise() -> float:
    return math.inf


def always_precise() -> float:
    return 0.0


def at(samples: int, *, rounds: int = 10, measured: float = 1.0, elapsed: float = 1.1, next_s: float = 0.0) -> Progress:
    return Progress(samples=samples, rounds=rounds, measured_s=measured, elapsed_s=elapsed, next_round_s=next_s)


def test_min_samples_is_the_fewest_for_which_the_ci_of_the_median_exists() -> None:
    assert DEFAULT_MIN_SAMPLES == 6
    assert median_ci([1.0, 2, 3, 4, 5]) == (-math.inf, math.inf)
    assert all(math.isfinite(x) for x in median_ci([1.0, 2, 3, 4, 5, 6]))


def test_the_budget_stops_only_after_min_samples() -> None:
    spent = at(5, measured=2.5, elapsed=3.0, next_s=0.5)
    assert RULE.check(spent, never_precise) is None  # the budget extends for slow calls
    assert RULE.check(at(6, measured=2.5, elapsed=3.0, next_s=0.5), never_precise) is Stop.BUDGET


def test_precision_stops_after_min_time_rounds_and_precision_samples() -> None:
    assert RULE.check(at(10), always_precise) is Stop.PRECISE
    assert RULE.check(at(10), never_precise) is None
    assert RULE.check(at(9), always_precise) is None
    assert RULE.check(at(10, rounds=2), always_precise) is None
    assert RULE.check(at(10, measured=0.1), always_precise) is None
    # a rule with more min_samples than precision samples waits for them
    strict = StoppingRule.from_settings(
        MeasureSettings(min_samples=12, min_time_s=0.0), round_s=0.1, precision_samples=10
    )
    assert strict.check(at(11), always_precise) is None
    assert strict.check(at(12), always_precise) is Stop.PRECISE


def test_a_long_call_stops_at_half_the_budget() -> None:
    half = SETTINGS.max_time_s * LONG_CALL_BUDGET_SHARE

    def long(samples: int, measured: float, sample_s: float = LONG_SAMPLE_S) -> Progress:
        return Progress(samples, samples, measured, measured + 0.1, next_round_s=sample_s, sample_s=sample_s)

    assert RULE.check(long(8, measured=half), never_precise) is Stop.LONG_CALL
    assert RULE.check(long(8, measured=half * 0.9), never_precise) is None
    assert RULE.check(long(8, measured=half, sample_s=LONG_SAMPLE_S / 2), never_precise) is None  # short: all of it
    assert RULE.check(long(5, measured=half * 3), never_precise) is None  # min_samples first
    assert RULE.check(at(8, measured=half), never_precise) is None  # a loop that does not know its sample length


def test_a_check_stops_a_long_call_at_its_samples() -> None:
    check = dataclasses.replace(RULE, check_samples=3)

    def long(samples: int, sample_s: float = LONG_SAMPLE_S) -> Progress:
        return Progress(samples, samples, samples * sample_s, samples * sample_s + 0.1, sample_s, sample_s)

    assert check.check(long(3), never_precise) is Stop.CHECKED  # before min_samples: it is never gated
    assert check.check(long(2), never_precise) is None
    assert RULE.check(long(3), never_precise) is None  # a full measurement waits for min_samples
    assert check.check(long(3, sample_s=LONG_SAMPLE_S / 2), never_precise) is None  # short calls: the full rule


def test_precision_is_not_computed_before_it_can_decide() -> None:
    def must_not_run() -> float:
        raise AssertionError("precision computed too early")

    assert RULE.check(at(5), must_not_run) is None
    assert RULE.check(at(20, measured=0.05), must_not_run) is None


def test_the_time_limit_stops_whatever_the_count_once_the_next_round_would_not_fit() -> None:
    limit = SETTINGS.time_limit_s
    fits = at(3, measured=100.0, elapsed=limit - 10.0, next_s=10.0 / LIMIT_MARGIN)
    assert RULE.check(fits, never_precise) is None
    past = at(3, measured=100.0, elapsed=limit - 10.0, next_s=10.0 / LIMIT_MARGIN + 0.01)
    assert RULE.check(past, never_precise) is Stop.LIMIT
    assert RULE.check(at(50, elapsed=limit), always_precise) is Stop.LIMIT


def test_the_first_round_always_runs() -> None:
    assert RULE.check(at(0, rounds=0, measured=0.0, elapsed=500.0, next_s=60.0), always_precise) is None


def test_the_sample_cap_stops() -> None:
    assert RULE.check(at(20_000, measured=0.01), never_precise) is Stop.CAP


def test_samples_that_fit_keep_the_margin_and_the_reserve() -> None:
    rule = StoppingRule.from_settings(MeasureSettings(time_limit_s=10.0), round_s=0.1)
    assert rule.samples_that_fit(0.0, 1.0) == math.floor(10 / LIMIT_MARGIN)
    assert rule.samples_that_fit(0.0, 1.0, reserve_s=2.0) == math.floor((10 - 2 * LIMIT_MARGIN) / LIMIT_MARGIN)
    assert rule.samples_that_fit(9.9, 1.0) == 0
    assert rule.fits(0.0, 10 / LIMIT_MARGIN) and not rule.fits(0.1, 10 / LIMIT_MARGIN)


@pytest.mark.parametrize(
    ("count", "what", "note"),
    [
        (1, "sample", "1 sample, fewer than the 6 a verdict needs, within the 120 s time limit (--gpuperf-time-limit)"),
        (3, "pair", "3 pairs, fewer than the 6 a verdict needs, within the 120 s time limit (--gpuperf-time-limit)"),
        (6, "sample", None),
    ],
)
def test_shortfall_note(count: int, what: str, note: str | None) -> None:
    assert RULE.shortfall_note(count, what) == note
