"""Pure statistics for the runner's stopping rule and the gate's verdicts (docs/statistics.md).

Two kinds of uncertainty are kept apart: within a run, the samples scatter around
their median (``median_ci``, ``ratio_of_medians_ci``, ``paired_median_ratio``);
between runs, the whole median moves from one process to the next
(``between_run_noise``, ``noise_floor``).
"""

from __future__ import annotations

import functools
import math
import statistics
import warnings
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np

# Written on numpy: importing scipy.stats costs about a second in every process that
# compares. scipy is imported only where nothing lighter serves; tests/test_stats.py
# checks each numpy replacement against scipy.

DEFAULT_CONFIDENCE = 0.95
# Bootstrap cost grows with n_resamples x sample count; beyond this many samples
# per side the data are thinned evenly in time (a wider, never narrower, CI).
_MAX_BOOTSTRAP_SAMPLES = 4000
_MAX_BOOTSTRAP_ELEMENTS_PER_BATCH = 2_000_000

Samples: TypeAlias = "Sequence[float] | np.ndarray"


def _as_array(samples: Samples, what: str) -> np.ndarray:
    arr = np.asarray(samples, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what}: need a non-empty 1-d sequence of samples")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: samples must be finite numbers")
    return arr


def _half_binomial_cdf(n: int, upto: int) -> np.ndarray:
    """``P(B <= k)`` for ``B ~ Binomial(n, 1/2)`` and ``k = 0 .. upto``, summed in log space (no overflow)."""
    k = np.arange(1, upto + 1, dtype=float)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log(n - k + 1.0) - np.log(k))))
    return np.minimum(np.exp(np.logaddexp.accumulate(log_choose) - n * math.log(2.0)), 1.0)


@functools.lru_cache(maxsize=4096)
def _order_statistic_ranks(n: int, confidence: float) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the distribution-free CI of the median, or None if n is too small.

    The number of samples below the true median is Binomial(n, 1/2); the ranks are
    the narrowest pair whose coverage is at least ``confidence``.
    """
    alpha = 1.0 - round(confidence, 12)
    # P(B <= k) for k = 0 .. n//2; j is the largest k with P(B <= k) <= alpha/2
    cdf = _half_binomial_cdf(n, n // 2)
    j = int(np.searchsorted(cdf, alpha / 2.0, side="right")) - 1
    # j counts the samples that may lie below the CI; the CI is [x_(j+1), x_(n-j)] (1-based)
    if j < 0:
        return None
    return j, n - j - 1


def median_ci(samples: Samples, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Distribution-free CI of the median from order statistics (binomial).

    ``(-inf, inf)`` with too few samples for ``confidence`` (n < 6 at 95%).
    """
    arr = _as_array(samples, "median_ci")
    ranks = _order_statistic_ranks(arr.size, confidence)
    if ranks is None:
        return -math.inf, math.inf
    lo, hi = ranks
    part = np.partition(arr, (lo, hi))
    return float(part[lo]), float(part[hi])


def relative_precision(samples: Samples, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """Half-width of the CI of the median divided by the median (0.01 = +-1%).

    Called after every round, hence the order-statistic CI rather than a bootstrap.
    ``inf`` while there are too few samples or the median is not positive.
    """
    arr = _as_array(samples, "relative_precision")
    low, high = median_ci(arr, confidence)
    mid = float(np.median(arr))
    if not math.isfinite(low) or mid <= 0:
        return math.inf
    return (high - low) / 2.0 / mid


def _thin(arr: np.ndarray, limit: int) -> np.ndarray:
    if arr.size <= limit:
        return arr
    return arr[np.linspace(0, arr.size - 1, limit).round().astype(int)]  # evenly in time


def ratio_of_medians_ci(
    a: Samples, b: Samples, confidence: float = DEFAULT_CONFIDENCE, *, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """``median(a) / median(b)`` with a percentile-bootstrap CI (seeded: deterministic).

    ``a`` is the new side, ``b`` the reference (1.10: ``a`` is 10% slower). Percentile,
    not BCa: BCa's jackknife is unreliable for medians of tied or discrete data.
    """
    xa = _as_array(a, "ratio_of_medians_ci(a)")
    xb = _as_array(b, "ratio_of_medians_ci(b)")
    if np.median(xb) <= 0 or np.median(xa) <= 0:
        raise ValueError("ratio_of_medians_ci: medians must be positive")
    ratio = float(np.median(xa) / np.median(xb))
    if xa.size < 2 or xb.size < 2:
        return ratio, -math.inf, math.inf
    xa = _thin(xa, _MAX_BOOTSTRAP_SAMPLES)
    xb = _thin(xb, _MAX_BOOTSTRAP_SAMPLES)
    ratios = _bootstrap_median_ratios(xa, xb, n_resamples, np.random.default_rng(seed))
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = (float(q) for q in np.percentile(ratios, [tail, 100.0 - tail]))
    if not (math.isfinite(low) and math.isfinite(high)):
        return ratio, ratio, ratio
    return ratio, min(low, ratio), max(high, ratio)


def _bootstrap_median_ratios(xa: np.ndarray, xb: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``median(a*) / median(b*)`` for ``n_resamples`` resamples of each side, in batches of bounded memory."""
    batch = max(1, _MAX_BOOTSTRAP_ELEMENTS_PER_BATCH // (xa.size + xb.size))
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, batch):
        rows = min(batch, n_resamples - start)
        med_a = np.median(xa[rng.integers(0, xa.size, (rows, xa.size))], axis=1)
        med_b = np.median(xb[rng.integers(0, xb.size, (rows, xb.size))], axis=1)
        out[start : start + rows] = med_a / med_b
    return out


def paired_median_ratio(
    a_round_medians: Samples, b_round_medians: Samples, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float, float, float]:
    """Median of per-pair ratios ``a_i / b_i`` with its order-statistic CI and a sign-test p-value.

    Pairs that straddle a step in the machine's speed are outliers the median ignores.
    p is the two-sided sign test of "ratio = 1", ties dropped. Returns ``(ratio, low, high, p)``.
    """
    ra = _as_array(a_round_medians, "paired_median_ratio(a)")
    rb = _as_array(b_round_medians, "paired_median_ratio(b)")
    if ra.size != rb.size:
        raise ValueError(f"paired_median_ratio: {ra.size} rounds of a but {rb.size} of b")
    if np.any(ra <= 0) or np.any(rb <= 0):
        raise ValueError("paired_median_ratio: round medians must be positive")
    ratios = ra / rb
    ratio = float(np.median(ratios))
    low, high = median_ci(ratios, confidence)
    above = int(np.count_nonzero(ratios > 1.0))
    below = int(np.count_nonzero(ratios < 1.0))
    n = above + below
    fewer = min(above, below)
    p = 1.0 if n == 0 else min(1.0, 2.0 * float(_half_binomial_cdf(n, fewer)[fewer]))
    return ratio, low, high, p


def replicate_ratio_ci(
    ratios: Samples, confidence: float = DEFAULT_CONFIDENCE, errors: Samples = ()
) -> tuple[float, float, float, float]:
    """Geometric mean of independent replicate ratios with a Student-t CI and p-value on their logs.

    Each ratio comes from its own pair of processes, so their spread includes each pair's
    own offset (memory layout). ``errors``, where known, are each ratio's own standard error
    (log scale): the spread is taken as at least theirs (``replicate_spread``). Returns
    ``(ratio, low, high, p)``; infinite bounds below 2.
    """
    arr = _as_array(ratios, "replicate_ratio_ci")
    if np.any(arr <= 0):
        raise ValueError("replicate_ratio_ci: ratios must be positive")
    logs = np.log(arr)
    mean = float(logs.mean())
    ratio = math.exp(mean)
    if logs.size < 2:
        return ratio, -math.inf, math.inf, 1.0
    df = logs.size - 1
    sem = replicate_spread(arr, errors)[0] / math.sqrt(logs.size)
    if sem == 0.0:
        return ratio, ratio, ratio, (1.0 if mean == 0.0 else 0.0)
    from scipy import special  # only the compare-ref confirmation gets here (see the imports)

    t = float(special.stdtrit(df, 0.5 + confidence / 2.0))
    p = 2.0 * float(special.stdtr(df, -abs(mean) / sem))
    return ratio, math.exp(mean - t * sem), math.exp(mean + t * sem), p


def replicate_spread(ratios: Samples, errors: Samples = ()) -> tuple[float, bool]:
    """The standard deviation of replicates' log ratios, and whether their own errors set it.

    A replicate's ratio varies by its own measurement error plus an offset of its own
    (a random-effects model), so the spread between replicates cannot be less than the
    root mean square of their own errors. With three to six replicates the sample
    standard deviation now and then comes out far below that, and a t interval on it
    would be far too narrow; the spread is then taken at the errors' (the between-replicate
    component estimated at zero, as random-effects meta-analysis truncates it).
    """
    logs = np.log(_as_array(ratios, "replicate_spread"))
    sample = float(logs.std(ddof=1)) if logs.size > 1 else 0.0
    if len(errors) == 0:
        return sample, False
    own = _as_array(errors, "replicate_spread(errors)")
    if own.size != logs.size or np.any(own < 0):
        raise ValueError(f"replicate_spread: need one non-negative error per ratio, got {own.size} for {logs.size}")
    floor = float(np.sqrt(np.mean(own**2)))
    return (floor, True) if floor > sample else (sample, False)


def error_from_half_width(half_width: float, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The standard error that a two-sided interval of ``half_width`` at ``confidence`` stands for (normal)."""
    return half_width / statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)


def mann_whitney_p(a: Samples, b: Samples) -> float:
    """Two-sided Mann-Whitney U p-value (1.0 when it cannot be computed, e.g. all values equal).

    As scipy's ``mannwhitneyu`` computes it: exact for small samples without ties,
    else the normal approximation with tie and continuity corrections.
    """
    xa = _as_array(a, "mann_whitney_p(a)")
    xb = _as_array(b, "mann_whitney_p(b)")
    both = np.concatenate([xa, xb])
    if np.ptp(both) == 0:
        return 1.0
    ranks, tie_sizes = _average_ranks(both)
    if min(xa.size, xb.size) <= _MWU_EXACT_MAX and np.all(tie_sizes == 1):
        from scipy import stats as scipy_stats

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = float(scipy_stats.mannwhitneyu(xa, xb, alternative="two-sided", method="exact").pvalue)
        return p if math.isfinite(p) else 1.0
    n1, n2 = xa.size, xb.size
    n = n1 + n2
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2.0
    u = max(u1, n1 * n2 - u1)
    ties = float(np.sum(tie_sizes**3 - tie_sizes))
    sd = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1))))
    z = (u - n1 * n2 / 2.0 - 0.5) / sd
    p = math.erfc(z / math.sqrt(2.0))  # twice the normal survival function
    return min(1.0, p) if math.isfinite(p) else 1.0


_MWU_EXACT_MAX = 8  # scipy's rule: exact when a side has at most 8 samples and nothing ties


def _average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based ranks with ties sharing their average rank, and the size of each group of equal values."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    sizes = np.diff(np.r_[first, ordered.size])
    ranks = np.empty(values.size)
    ranks[order] = np.repeat(first + (sizes + 1) / 2.0, sizes)
    return ranks, sizes.astype(float)


# scipy's scale="normal" for the MAD: 1 / Phi^-1(3/4), so it estimates sigma for normal data
_MAD_TO_SIGMA = 1.0 / statistics.NormalDist().inv_cdf(0.75)


def _normal_scaled_mad(arr: np.ndarray) -> float:
    return _MAD_TO_SIGMA * float(np.median(np.abs(arr - np.median(arr))))


def between_run_noise(round_medians: Samples) -> float | None:
    """Relative spread of a median between rounds: a robust standard deviation over the median.

    ``None`` with fewer than 3 rounds. Rounds of one run share a process, so this is
    a lower bound on the spread between processes.
    """
    if len(round_medians) < 3:
        return None
    arr = _as_array(round_medians, "between_run_noise")
    mid = float(np.median(arr))
    if mid <= 0:
        return None
    return _normal_scaled_mad(arr) / mid


# Croux & Rousseeuw (1992): factors that make the normal-scaled MAD of n values unbiased
# for small n (for n = 3 it averages 0.67 sigma without one). Beyond 9 values: n / (n - 0.8).
_MAD_SMALL_SAMPLE = {2: 1.196, 3: 1.495, 4: 1.363, 5: 1.206, 6: 1.200, 7: 1.140, 8: 1.129, 9: 1.107}


def between_process_noise(process_medians: Samples) -> float | None:
    """Relative spread of a median between independent processes (None with fewer than 2).

    Unlike round medians, these include each process's own offset (memory layout). A
    robust scale (MAD of the logs): with three readings, one slow one does not set it.
    """
    if len(process_medians) < 2:
        return None
    arr = _as_array(process_medians, "between_process_noise")
    if np.any(arr <= 0):
        raise ValueError("between_process_noise: medians must be positive")
    n = arr.size
    return _normal_scaled_mad(np.log(arr)) * _MAD_SMALL_SAMPLE.get(n, n / (n - 0.8))


def recorded_noise(round_medians: Samples, process_medians: Samples = ()) -> float | None:
    """The between-run noise a baseline records: the larger of the two estimates that exist.

    The spread of independent processes can come out small by chance from two or three
    readings, so the rounds' figure stays a floor.
    """
    known = [n for n in (between_run_noise(round_medians), between_process_noise(process_medians)) if n is not None]
    return max(known, default=None)


def noise_floor(baseline_noise: float | None, current_noise: float | None, multiplier: float) -> float:
    """Smallest relative change distinguishable from between-run noise: ``multiplier`` (a one-sided z) times
    the root-sum-square of both spreads, a missing side assumed as noisy as the known one."""
    known = [n for n in (baseline_noise, current_noise) if n is not None and math.isfinite(n)]
    if not known:
        return 0.0
    if len(known) == 1:
        known = known * 2
    return multiplier * math.sqrt(sum(n * n for n in known))


def format_p(p: float | None) -> str:
    """A p-value as a short string (``p=0.03``, ``p=1e-12``)."""
    if p is None or not math.isfinite(p):
        return "p=n/a"
    if p < 1e-3:
        return f"p={p:.0e}"
    return f"p={p:.2g}"


def format_level(confidence: float) -> str:
    """A confidence level as a percentage with the digits it has (``95%``, ``99.5%``)."""
    return f"{round(confidence * 100, 3):g}%"
