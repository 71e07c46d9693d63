"""The confirmation's rules that need no worker processes: when a second wave is not worth measuring, and when
an open verdict earns an extension wave."""

from __future__ import annotations

import math

import pytest

from pytest_gpuperf.readings import futile, pair_waves, undecided


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


def test_the_waves_are_a_first_three_the_planned_pairs_and_half_as_many_again() -> None:
    assert [pair_waves(n) for n in (3, 4, 6, 9)] == [(3, 4), (3, 4, 6), (3, 6, 9), (3, 9, 13)]
