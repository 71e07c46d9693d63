"""The confirmation's rules that need no worker processes: when the second wave is not worth measuring."""

from __future__ import annotations

import math

import pytest

from pytest_gpuperf.abtest.confirm import futile


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

