"""The confirmation's rules (verdict/pairs.py), which need no worker processes: when more pairs are not worth
measuring, when the pairs already decide either way, and when an open verdict earns an extension."""

from __future__ import annotations

import math

import pytest

from pytest_gpuperf.verdict.confirmation import IMPROVEMENT_CONFIDENCE
from pytest_gpuperf.verdict.pairs import (
    cleared,
    confirmed,
    futile,
    interim_confidence,
    pair_waves,
    pairs_done,
    undecided,
)


def test_a_first_wave_at_or_below_half_the_threshold_ends_the_confirmation() -> None:
    half = math.sqrt(1.02)  # half of a 2% threshold, in log space
    assert futile([1.0, 1.0, 1.0], 0.02, 6)
    assert futile([0.99, 1.005, 1.01], 0.02, 6)
    assert futile([half * 0.999] * 3, 0.02, 6)
    assert not futile([half * 1.001] * 3, 0.02, 6)
    # a real 3% regression's first wave (pair ratios of the detection benchmark)
    assert not futile([1.034, 1.045, 1.033], 0.02, 6)


def test_the_cut_scales_with_the_share_of_pairs_already_measured() -> None:
    # 3 of 4 pairs measured: the last one would need a mean far above the threshold
    # unless these three already reach 3/4 of it
    assert futile([1.013] * 3, 0.02, 4)
    assert not futile([1.016] * 3, 0.02, 4)


@pytest.mark.parametrize("ratios, planned", [([], 6), ([1.0] * 6, 6), ([1.0] * 3, 3)])
def test_nothing_to_stop_when_no_pair_or_every_pair_is_measured(ratios: list[float], planned: int) -> None:
    assert not futile(ratios, 0.02, planned)


# Six fresh pairs' ratios as a 3% slowdown gives them on a noisy CPU.
OPEN_HIGH = [1.043, 1.063, 1.074, 1.012, 1.019, 0.990]  # +3.3%, interval touches 1
OPEN_LOW = [1.021, 1.047, 1.002, 1.009, 1.030, 0.993]  # +1.7% [-0.4%, +3.8%]
CONFIRMED = [1.024, 1.032, 1.048, 1.031, 1.047, 1.011]  # +3.2% [+1.7%, +4.7%]
ONE_FAR_OFF = [1.05, 1.031, 1.021, 1.04, 0.892, 1.02]  # +0.8%: under half the threshold


def test_an_open_verdict_above_half_the_threshold_is_undecided() -> None:
    assert undecided(OPEN_HIGH, 0.02, 0.95)
    assert undecided(OPEN_LOW, 0.02, 0.95)


def test_a_confirmed_regression_or_a_small_estimate_is_decided() -> None:
    assert not undecided(CONFIRMED, 0.02, 0.95)  # a regression already: nothing to add
    assert not undecided(ONE_FAR_OFF, 0.02, 0.95)  # below half the threshold
    assert not undecided([1.0, 1.002, 0.998, 1.001, 0.999, 1.0], 0.02, 0.95)
    # significant and above half the threshold, but the interval stays below 1 + threshold
    assert not undecided([1.012, 1.013, 1.011, 1.012, 1.013, 1.012], 0.02, 0.95)


def test_too_few_pairs_are_never_extended() -> None:
    assert not undecided(OPEN_HIGH[:2], 0.02, 0.95)


def test_after_the_first_three_pairs_every_pair_is_a_look_through_the_extension() -> None:
    assert [pair_waves(n) for n in (3, 4, 6)] == [(3, 4), (3, 4, 5, 6), (3, 4, 5, 6, 7, 8, 9)]
    assert pair_waves(9) == tuple(range(3, 14))


def done(ratios: list[float], looked: int, pairs: int = 6) -> bool:
    return pairs_done(ratios, looked, pairs=pairs, threshold=0.02, confidence=0.95)


def test_a_regression_clear_after_four_pairs_stops_there_not_at_the_planned_six() -> None:
    # a 7% slowdown: three pairs leave its 99% interval reaching below 1 (2 degrees of freedom), four do not
    ratios = [1.067, 1.073, 1.100, 1.072]
    assert not done(ratios[:3], 3)
    assert done(ratios, 4)


def test_futility_is_judged_at_the_first_look_only() -> None:
    # +1.6%, +1.1%, +1.2% reach above half the 2% threshold (log scale): not futile at three of six
    ratios = [1.016, 1.011, 1.012]
    assert not futile(ratios, 0.02, 6) and not done(ratios, 3)
    # a fourth pair at -0.5% would make it futile over six, but the extension could still confirm it
    assert futile([*ratios, 0.995], 0.02, 6) and not done([*ratios, 0.995], 4)


def test_a_later_pair_that_rules_the_change_out_ends_the_confirmation() -> None:
    ratios = [1.0145, 1.0085, 1.0115]  # +1.1%: neither futile nor, with two degrees of freedom, ruled out
    assert not done(ratios, 3)
    assert done([*ratios, 1.0115], 4)  # now the 99% interval ends below +2%


def test_an_upper_bound_below_the_threshold_clears_whatever_the_estimate() -> None:
    tight = [1.013, 1.014, 1.012, 1.013]  # +1.3%, its 99% interval well below +2%
    assert cleared(tight, 0.02, 0.99)
    assert not cleared([1.013, 1.03, 1.0, 1.02], 0.02, 0.99)
    assert not cleared(tight[:2], 0.02, 0.99)  # no interval from two pairs


def test_the_extension_is_looked_at_pair_by_pair_and_ends_at_half_as_many_again() -> None:
    assert not done(OPEN_HIGH, 6)
    assert not done([*OPEN_HIGH, 1.05], 7)
    assert done([*OPEN_HIGH, 1.06, 1.07], 8)  # confirmed at the interim 99% on the extension's second pair
    assert done([*OPEN_HIGH, 1.05, 1.06, 1.04], 9)


def test_confirmation_pairs_stop_early_when_they_clear_or_clearly_confirm() -> None:
    assert done([1.0, 1.002, 0.998], 3)  # futile: the other three could not make +2%
    assert done([1.30, 1.31, 1.29], 3)  # confirmed at the interim 99% level already
    assert not done([1.03, 1.045, 1.02], 3)  # possible but not yet clear: the planned six
    assert done([1.03, 1.045, 1.02, 1.04, 1.035, 1.03], 6)  # decided at the planned count
    open_verdict = [1.043, 1.063, 1.074, 1.012, 1.019, 0.990]  # +3.3%, its interval touches 1
    assert not done(open_verdict, 6)  # open: one extension wave
    assert done([*open_verdict, 1.03, 1.031, 1.04], 9)  # the extension is the last wave
    assert done([1.2], 3)  # too few pairs could measure


def test_an_interim_look_is_stricter_than_the_final_one() -> None:
    # three pairs whose 95% interval excludes 1 but whose 99% interval does not: keep measuring
    ratios = [1.05, 1.03, 1.07]
    assert confirmed(ratios, 0.02, 0.95)
    assert not confirmed(ratios, 0.02, interim_confidence(0.95))
    assert not done(ratios, 3)


def test_an_improvements_early_look_is_stricter_than_its_final_one_too() -> None:
    # a final look at 99% asks 99.8% of an early one; improvements' 99.5% (verdict/confirmation.py), 99.9%
    assert interim_confidence(0.95) == pytest.approx(0.99)
    assert interim_confidence(0.99) == pytest.approx(0.998)
    assert interim_confidence(IMPROVEMENT_CONFIDENCE) == pytest.approx(0.999)
    faster = [1.027, 1.03, 1.033]  # an improvement's pairs, turned: +3%, its 99% interval above 1, its 99.8% not
    assert confirmed(faster, 0.02, 0.99)
    assert not pairs_done(faster, 3, pairs=6, threshold=0.02, confidence=0.99)


def test_pairs_that_agree_more_closely_than_each_was_measured_do_not_decide_early() -> None:
    # an unchanged test's three fresh pairs that read the head 3.4% faster, within 0.4% of each other,
    # each pair measured to +-2% (a standard error of 1%): turned, as an improvement is
    faster = [1 / 0.966, 1 / 0.966, 1 / 0.970]
    assert confirmed(faster, 0.02, 0.99)  # the sample spread alone: a credited speed-up
    own = [0.01, 0.01, 0.01]
    assert not confirmed(faster, 0.02, 0.99, own)
    assert not pairs_done(faster, 3, pairs=6, threshold=0.02, confidence=0.99, errors=own)  # more pairs decide


def test_the_pairs_errors_are_used_only_when_every_pair_could_tell_its_own() -> None:
    from pytest_gpuperf.engines.compare_ref.confirm import PairReading, errors_of

    assert errors_of([PairReading(1.0, 10.0, 0.01), PairReading(1.01, 10.0, 0.012)]) == [0.01, 0.012]
    # a pair whose rounds gave no interval: no floor at all, rather than one from the others alone
    assert errors_of([PairReading(1.0, 10.0, 0.01), PairReading(1.01, 10.0, None)]) == []
