from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpuperf import stats


def _normal(mean: float, sd: float, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(mean, sd, n)


def test_median_ci_brackets_the_median_with_binomial_ranks() -> None:
    data = list(range(1, 101))  # n=100: the 95% CI is the 40th..61st order statistic
    low, high = stats.median_ci(data)
    assert (low, high) == (40.0, 61.0)


def test_median_ci_is_unbounded_with_too_few_samples() -> None:
    assert stats.median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) == (-math.inf, math.inf)
    assert stats.relative_precision([1.0, 2.0, 3.0]) == math.inf
    assert math.isfinite(stats.relative_precision([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))


def test_median_ci_coverage_is_at_least_nominal() -> None:
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(400):
        low, high = stats.median_ci(rng.exponential(1.0, 41))
        hits += low <= math.log(2) <= high
    assert hits / 400 >= 0.93


def test_relative_precision_shrinks_with_more_samples() -> None:
    few = stats.relative_precision(_normal(100, 5, 50, 1))
    many = stats.relative_precision(_normal(100, 5, 5000, 1))
    assert many < few / 5
    assert many == pytest.approx(0.0016, rel=0.5)


def test_ratio_ci_of_identical_distributions_contains_one() -> None:
    ratio, low, high = stats.ratio_of_medians_ci(_normal(100, 3, 400, 1), _normal(100, 3, 400, 2))
    assert low < 1.0 < high
    assert ratio == pytest.approx(1.0, abs=0.01)


def test_ratio_ci_of_a_ten_percent_shift_excludes_one() -> None:
    ratio, low, high = stats.ratio_of_medians_ci(_normal(110, 1, 200, 1), _normal(100, 1, 200, 2))
    assert 1.0 < low <= ratio <= high
    assert ratio == pytest.approx(1.10, abs=0.005)


def test_ratio_ci_is_deterministic_and_handles_ties() -> None:
    a, b = _normal(100, 3, 300, 3), _normal(101, 3, 300, 4)
    assert stats.ratio_of_medians_ci(a, b) == stats.ratio_of_medians_ci(a, b)
    assert stats.ratio_of_medians_ci([5.0] * 20, [5.0] * 20) == (1.0, 1.0, 1.0)


def test_ratio_ci_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="finite"):
        stats.ratio_of_medians_ci([1.0, math.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="non-empty"):
        stats.ratio_of_medians_ci([], [1.0])


def test_paired_median_ratio_ignores_pairs_that_straddle_a_speed_change() -> None:
    # 40 pairs, a true 3% slowdown; the machine is 1.7x slower in pairs 10-19, and in
    # 5 pairs the speed changed between the two rounds of the pair (either way round)
    speed = np.where((np.arange(40) >= 10) & (np.arange(40) < 20), 1.7, 1.0)
    a = 103 * speed * (1 + _normal(0, 0.003, 40, 1))
    b = 100 * speed * (1 + _normal(0, 0.003, 40, 2))
    for i, factor in zip((3, 9, 19, 25, 33), (1.7, 1 / 1.7, 1.7, 1.7, 1 / 1.7), strict=True):
        a[i] *= factor
    ratio, low, high, p = stats.paired_median_ratio(a, b)
    assert 1.02 < low < ratio < high < 1.04
    assert p < 1e-6
    # the mean of the ratios is dragged far off by the five straddling pairs
    assert abs(float(np.mean(a / b)) - 1.03) > 0.02


def test_paired_median_ratio_unchanged_code_and_small_samples() -> None:
    a = 100 * (1 + _normal(0, 0.01, 30, 3))
    b = 100 * (1 + _normal(0, 0.01, 30, 4))
    _, low, high, p = stats.paired_median_ratio(a, b)
    assert low < 1.0 < high
    assert p > 0.05
    # five pairs are too few for a 95% interval of a median: nothing can be claimed
    assert stats.paired_median_ratio([2.0] * 5, [1.0] * 5)[1:3] == (-math.inf, math.inf)
    assert stats.paired_median_ratio([1.0, 1.0], [1.0, 1.0])[3] == 1.0
    with pytest.raises(ValueError, match="rounds"):
        stats.paired_median_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        stats.paired_median_ratio([1.0, 0.0], [1.0, 1.0])


def test_order_statistic_ranks_match_the_binomial() -> None:
    # n=6 is the smallest sample with a 95% CI of the median: [x_(1), x_(6)], coverage 1 - 2/64
    assert stats._order_statistic_ranks(5, 0.95) is None
    assert stats._order_statistic_ranks(6, 0.95) == (0, 5)
    # n=100: the textbook ranks 40 and 61 (1-based)
    assert stats._order_statistic_ranks(100, 0.95) == (39, 60)


def test_mann_whitney() -> None:
    assert stats.mann_whitney_p([3.0] * 10, [3.0] * 10) == 1.0
    assert stats.mann_whitney_p(_normal(110, 1, 100, 1), _normal(100, 1, 100, 2)) < 1e-10
    assert stats.mann_whitney_p(_normal(100, 1, 100, 1), _normal(100, 1, 100, 2)) > 0.01


def test_between_run_noise() -> None:
    assert stats.between_run_noise([1.0, 2.0]) is None
    assert stats.between_run_noise([100.0, 100.0, 100.0]) == 0.0
    noise = stats.between_run_noise(_normal(100, 5, 200, 1))
    assert noise == pytest.approx(0.05, rel=0.2)


def test_between_process_noise_is_unbiased_for_two_and_three_readings() -> None:
    assert stats.between_process_noise([1.0]) is None
    assert stats.between_process_noise([100.0, 100.0]) == 0.0
    # two readings: |log ratio| * 1.4826 / 2 * 1.196
    assert stats.between_process_noise([100.0, 110.0]) == pytest.approx(math.log(1.1) * 0.8866, rel=1e-3)
    # averaged over many draws, the estimate matches the true spread of log-normal medians
    rng = np.random.default_rng(3)
    for n in (2, 3, 5):
        draws = np.exp(rng.normal(0.0, 0.05, size=(20000, n)))
        mean = np.mean([stats.between_process_noise(row) for row in draws])
        assert mean == pytest.approx(0.05, rel=0.05), n


def test_between_process_noise_is_not_set_by_one_slow_reading() -> None:
    # a reading taken in a slow moment: the other two set the spread
    assert stats.between_process_noise([100.0, 400.0, 102.0]) == pytest.approx(
        math.log(1.02) * 1.4826 * 1.495, rel=1e-3
    )
    with pytest.raises(ValueError, match="positive"):
        stats.between_process_noise([100.0, 0.0])


def test_recorded_noise_takes_the_larger_estimate() -> None:
    rounds = [100.0, 101.0, 99.0]
    assert stats.recorded_noise(rounds) == stats.between_run_noise(rounds)
    assert stats.recorded_noise(rounds, [100.0, 130.0, 160.0]) == stats.between_process_noise([100.0, 130.0, 160.0])
    assert stats.recorded_noise(rounds, [100.0, 100.0]) == stats.between_run_noise(rounds)  # agreeing by chance
    assert stats.recorded_noise([1.0, 2.0], [100.0]) is None


def test_noise_floor() -> None:
    assert stats.noise_floor(None, None, 3.0) == 0.0
    assert stats.noise_floor(0.03, 0.04, 2.0) == pytest.approx(0.10)
    assert stats.noise_floor(0.03, None, 1.0) == pytest.approx(0.03 * math.sqrt(2))


def test_format_level_keeps_the_digits_a_level_has() -> None:
    assert [stats.format_level(c) for c in (0.95, 0.99, 0.995, 0.999)] == ["95%", "99%", "99.5%", "99.9%"]


def test_format_p() -> None:
    assert stats.format_p(1e-12) == "p=1e-12"
    assert stats.format_p(0.031) == "p=0.031"
    assert stats.format_p(None) == "p=n/a"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=1.0, max_value=1e9), min_size=6, max_size=200))
def test_median_ci_always_brackets_the_sample_median(data: list[float]) -> None:
    low, high = stats.median_ci(data)
    assert low <= float(np.median(data)) <= high
    assert stats.relative_precision(data) >= 0


def test_replicate_ratio_ci_uses_the_spread_between_replicates() -> None:
    ratio, low, high, p = stats.replicate_ratio_ci([1.03, 1.05, 1.02, 1.04, 1.06, 1.03])
    assert 1.0 < low < ratio < high < 1.07
    assert ratio == pytest.approx(1.038, abs=0.002)
    assert p < 0.01
    # identical code in processes with offsets of a few percent: no claim
    _, low, high, p = stats.replicate_ratio_ci([1.03, 0.97, 1.01, 0.99, 1.02, 0.98])
    assert low < 1.0 < high
    assert p > 0.5
    assert stats.replicate_ratio_ci([1.1]) == (pytest.approx(1.1), -math.inf, math.inf, 1.0)
    assert stats.replicate_ratio_ci([1.1, 1.1, 1.1])[1:] == (pytest.approx(1.1), pytest.approx(1.1), 0.0)
    with pytest.raises(ValueError, match="positive"):
        stats.replicate_ratio_ci([1.0, -1.0])


def test_replicates_spread_no_less_than_their_own_errors() -> None:
    # three pairs of an unchanged test that agreed by chance far more closely than each was measured
    tight = [0.966, 0.966, 0.970]
    spread, floored = stats.replicate_spread(tight)
    assert spread == pytest.approx(0.0024, abs=0.0003) and not floored
    spread, floored = stats.replicate_spread(tight, [0.01, 0.01, 0.01])
    assert spread == pytest.approx(0.01) and floored
    _, low, high, _ = stats.replicate_ratio_ci(tight, 0.99)
    _, low_e, high_e, _ = stats.replicate_ratio_ci(tight, 0.99, [0.01, 0.01, 0.01])
    assert high < 1.0 < high_e and low_e < low  # without the floor the interval excludes 1
    # pairs that already spread more than their errors keep their own spread
    spread_out = [1.03, 0.97, 1.01, 0.99, 1.02, 0.98]
    assert stats.replicate_ratio_ci(spread_out, 0.95, [0.005] * 6) == stats.replicate_ratio_ci(spread_out, 0.95)
    with pytest.raises(ValueError, match="one non-negative error per ratio"):
        stats.replicate_spread(tight, [0.01, 0.01])


def test_an_error_is_the_half_width_over_the_normal_quantile() -> None:
    assert stats.error_from_half_width(0.0196, 0.95) == pytest.approx(0.01, rel=1e-3)
    assert stats.error_from_half_width(0.025758, 0.99) == pytest.approx(0.01, rel=1e-4)


# The gating path is written on numpy to spare every process scipy's import (stats.py says
# why); scipy stays the reference these pieces must agree with.


@pytest.mark.parametrize("n", [0, 1, 2, 5, 6, 41, 100, 1001, 20000])
def test_the_binomial_cdf_at_one_half_matches_scipy(n: int) -> None:
    from scipy import special

    k = np.arange(n // 2 + 1)
    np.testing.assert_allclose(stats._half_binomial_cdf(n, n // 2), special.bdtr(k, n, 0.5), rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize(("shift", "n_a", "n_b", "seed"), [(1.0, 400, 400, 1), (1.04, 150, 900, 2), (0.9, 60, 60, 3)])
def test_the_bootstrap_interval_matches_scipys(shift: float, n_a: int, n_b: int, seed: int) -> None:
    from scipy import stats as scipy_stats

    rng = np.random.default_rng(seed)
    a = rng.lognormal(np.log(100 * shift), 0.05, n_a)
    b = rng.lognormal(np.log(100), 0.05, n_b)
    ratio, low, high = stats.ratio_of_medians_ci(a, b, n_resamples=20_000)
    ref = scipy_stats.bootstrap(
        (a, b), lambda x, y, axis: np.median(x, axis=axis) / np.median(y, axis=axis), n_resamples=20_000,
        method="percentile", vectorized=True, paired=False, rng=np.random.default_rng(seed),
    ).confidence_interval  # fmt: skip
    width = high - low
    assert low == pytest.approx(ref.low, abs=0.05 * width)  # two Monte Carlo estimates of one interval
    assert high == pytest.approx(ref.high, abs=0.05 * width)
    assert width > 0.0 and low < ratio < high


@pytest.mark.parametrize(
    ("n_a", "n_b", "decimals", "shift"),
    [(300, 300, 1, 0.0), (40, 500, 0, 0.3), (9, 12, 3, 0.5), (200, 150, 3, 0.05), (5, 30, 0, 1.0), (3, 6, 4, 0.0)],
)
def test_mann_whitney_matches_scipy(n_a: int, n_b: int, decimals: int, shift: float) -> None:
    from scipy import stats as scipy_stats

    rng = np.random.default_rng(n_a * 1000 + n_b)
    a = np.round(rng.normal(10 + shift, 1, n_a), decimals)  # few decimals: ties
    b = np.round(rng.normal(10, 1, n_b), decimals)
    expected = scipy_stats.mannwhitneyu(a, b, alternative="two-sided").pvalue
    assert stats.mann_whitney_p(a, b) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_the_normal_scaled_mad_matches_scipy() -> None:
    from scipy import stats as scipy_stats

    data = np.random.default_rng(5).standard_t(3, 501)
    assert stats._normal_scaled_mad(data) == pytest.approx(scipy_stats.median_abs_deviation(data, scale="normal"))


def test_sample_stats_percentiles_interpolate_linearly_between_ordered_samples() -> None:
    from pytest_gpuperf.model import SampleStats

    s = SampleStats.from_samples([4.0, 1.0, 3.0, 2.0])
    assert (s.median_ns, s.p90_ns, s.p99_ns, s.iqr_ns) == pytest.approx((2.5, 3.7, 3.97, 1.5))
    assert (s.min_ns, s.max_ns, s.count) == (1.0, 4.0, 4)
    one = SampleStats.from_samples([7.0])
    assert (one.median_ns, one.p99_ns, one.iqr_ns, one.stdev_ns) == (7.0, 7.0, 0.0, 0.0)
