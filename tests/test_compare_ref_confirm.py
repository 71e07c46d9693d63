"""The confirmation's plan (verdict/pairs.py), which needs no worker processes: the looks after each pair, when
they stop, and the outcome the last one reads."""

from __future__ import annotations

import pytest

from pytest_gpuperf.verdict.pairs import error_rate, oriented, oriented_threshold, pair_waves, pairs_done, pairs_look
from pytest_gpuperf.verdict.sequential import Outcome

BUDGET = 12


def done(ratios: list[float], looked: int, budget: int = BUDGET, errors: tuple[float, ...] = ()) -> bool:
    return pairs_done(ratios, looked, budget=budget, threshold=0.02, confidence=0.95, errors=errors)


def outcome(ratios: list[float], errors: tuple[float, ...] = ()) -> Outcome:
    return pairs_look(ratios, budget=BUDGET, threshold=0.02, confidence=0.95, errors=errors).outcome


def test_the_first_three_pairs_are_one_look_then_every_pair_is_one() -> None:
    assert [pair_waves(n) for n in (3, 4, 6)] == [(3,), (3, 4), (3, 4, 5, 6)]
    assert pair_waves(12) == tuple(range(3, 13))


def test_the_error_rate_is_half_of_what_the_confidence_leaves() -> None:
    assert error_rate(0.95) == pytest.approx(0.025)
    assert error_rate(0.995) == pytest.approx(0.0025)


def test_pairs_that_agree_on_no_change_stop_as_soon_as_they_are_within() -> None:
    unchanged = [1.006, 0.993, 1.004, 0.997, 1.001]  # spread by 0.5%: within at the first look
    assert outcome(unchanged[:3]) is Outcome.WITHIN and done(unchanged[:3], 3)
    spread = [1.012, 0.985, 1.009, 0.994, 1.002]  # by 1.2%: two degrees of freedom are not enough
    assert not done(spread[:3], 3)
    assert any(done(spread[:n], n) for n in (4, 5)) and outcome(spread) is Outcome.WITHIN


def test_a_large_regression_stops_beyond_the_threshold_after_a_few_pairs() -> None:
    slower = [1.10, 1.09, 1.11, 1.095]  # +10%, spread by 0.9%
    assert outcome(slower[:3]) is Outcome.OPEN
    assert outcome(slower) is Outcome.BEYOND and done(slower, 4)


def test_a_change_as_likely_below_the_threshold_as_above_it_is_not_resolved_at_the_budget() -> None:
    # +2.2%, its pairs spread by 1.5%: the interval reaches both sides of +2% whatever the pairs' count
    ratios = [1.030, 1.007, 1.037, 1.015, 1.028, 1.009, 1.040, 1.012, 1.022, 1.035, 1.006, 1.024]
    for n in range(3, BUDGET):
        assert not done(ratios[:n], n)
    assert outcome(ratios) is Outcome.OPEN and done(ratios, BUDGET)


def test_too_few_measured_pairs_end_the_confirmation() -> None:
    assert done([1.2, 1.3], 3)  # a pair of the first three could not measure: more of the same will not help


def test_pairs_closer_than_their_own_errors_look_as_far_as_those_errors_allow() -> None:
    # five pairs at +3.5% within 0.1% of each other, each measured to +-2% (a standard error of 1%)
    close = [1.035, 1.0355, 1.0345, 1.035, 1.0352]
    assert outcome(close) is Outcome.BEYOND
    assert outcome(close, (0.01,) * 5) is Outcome.OPEN


def test_an_improvement_is_looked_at_turned_with_its_own_threshold() -> None:
    faster = [0.95, 0.951, 0.949, 0.95]
    turned = oriented(faster, improvement=True)
    assert all(t > 1.05 for t in turned)
    assert oriented_threshold(0.02, improvement=True) == pytest.approx(0.02 / 0.98)
    assert pairs_look(turned, budget=BUDGET, threshold=oriented_threshold(0.02, True), confidence=0.995).outcome \
        is Outcome.BEYOND  # fmt: skip


def test_the_pairs_errors_are_used_only_when_every_pair_could_tell_its_own() -> None:
    from pytest_gpuperf.engines.compare_ref.confirm import PairReading, errors_of

    assert errors_of([PairReading(1.0, 10.0, 0.01), PairReading(1.01, 10.0, 0.012)]) == [0.01, 0.012]
    # a pair whose rounds gave no interval: no floor at all, rather than one from the others alone
    assert errors_of([PairReading(1.0, 10.0, 0.01), PairReading(1.01, 10.0, None)]) == []


def test_a_suspected_improvement_that_the_pairs_do_not_show_stops_early_a_regression_does_not() -> None:
    # three pairs around no change, spread by 1.75% (a loaded runner): a regression cannot be ruled out yet,
    # an improvement not shown is not claimed, at no cost, so its pairs stop
    spread = [1.02, 0.985, 1.0]
    turned = oriented(spread, improvement=True)
    threshold = oriented_threshold(0.02, improvement=True)
    assert not done(spread, 3)
    assert pairs_done(turned, 3, budget=BUDGET, threshold=threshold, confidence=0.995, improvement=True)
    assert not pairs_done(turned, 3, budget=BUDGET, threshold=threshold, confidence=0.995)
