"""Pure statistics for the runner's stopping rule and the gate's verdicts.

Everything here takes plain sequences of floats and returns floats, so it can be
tested on samples with known answers. Two kinds of uncertainty matter and are
kept apart (docs/statistics.md explains the rules built on them):

* within a run: the samples of one measurement scatter around their median.
  ``median_ci``/``relative_precision`` (distribution-free, order statistics)
  and ``ratio_of_medians_ci`` (bootstrap) describe it; for interleaved rounds
  ``paired_median_ratio`` takes the median of per-pair ratios, which the
  moments where the machine changes speed mid-pair cannot move;
* between runs: the whole median moves from one process to the next (clock
  frequency, load, memory layout). ``between_run_noise`` estimates it from
  round medians and ``noise_floor`` turns it into the smallest change worth
  calling a regression.
"""

from __future__ import annotations

import functools
import math
import statistics
import warnings
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np

# What a gating session needs is written on numpy: importing scipy.stats costs about a
# second in every process that compares (the head, the re-measure and compare-ref
# workers). scipy is imported only where nothing lighter serves (exact small-sample
# Mann-Whitney, Student's t for compare-ref replicates); tests/test_stats.py checks
# each numpy replacement against scipy.

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


def _order_statistic_ranks(n: int, confidence: float) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the distribution-free CI of the median, or None if n is too small.

    The number of samples below the true median is Binomial(n, 1/2), so
    [x_(j), x_(n-j+1)] covers the median with probability 1 - 2 P(B <= j-1).
    ``j`` is chosen as large as possible with that coverage >= ``confidence``.
    """
    return _ranks_cached(n, round(confidence, 12))


def _half_binomial_cdf(n: int, upto: int) -> np.ndarray:
    """``P(B <= k)`` for ``B ~ Binomial(n, 1/2)`` and ``k = 0 .. upto``.

    Summed in log space (log C(n, k) by the recurrence C(n, k) = C(n, k-1) (n-k+1) / k),
    so it neither overflows nor underflows for any n the runner reaches.
    """
    k = np.arange(1, upto + 1, dtype=float)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log(n - k + 1.0) - np.log(k))))
    return np.minimum(np.exp(np.logaddexp.accumulate(log_choose) - n * math.log(2.0)), 1.0)


@functools.lru_cache(maxsize=4096)
def _ranks_cached(n: int, confidence: float) -> tuple[int, int] | None:
    alpha = 1.0 - confidence
    # P(B <= k) for k = 0 .. n//2; j is the largest k with P(B <= k) <= alpha/2
    cdf = _half_binomial_cdf(n, n // 2)
    j = int(np.searchsorted(cdf, alpha / 2.0, side="right")) - 1
    # j counts the samples that may lie below the CI; the CI is [x_(j+1), x_(n-j)] (1-based)
    if j < 0:
        return None
    return j, n - j - 1


def median_ci(samples: Samples, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Distribution-free CI of the median from order statistics (binomial).

    Cheap (a partial sort), exact in coverage for continuous i.i.d. data. With
    too few samples for the requested confidence (n < 6 at 95%) the interval is
    ``(-inf, inf)``: nothing can be claimed yet.
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

    This is the runner's stopping rule, called after every round, hence the
    order-statistic CI rather than a bootstrap. ``inf`` while there are too
    few samples or the median is not positive.
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
    idx = np.linspace(0, arr.size - 1, limit).round().astype(int)
    return arr[idx]


def ratio_of_medians_ci(
    a: Samples,
    b: Samples,
    confidence: float = DEFAULT_CONFIDENCE,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``median(a) / median(b)`` with a percentile-bootstrap CI (seeded: deterministic).

    ``a`` is the new side, ``b`` the reference: a ratio of 1.10 means ``a`` is
    10% slower. The percentile method is used because BCa's jackknife is
    unreliable for medians of tied or discrete data. Degenerate data (all
    samples equal) give a zero-width interval at the ratio.
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
    """``median(a*) / median(b*)`` for ``n_resamples`` independent resamples of each side.

    In batches of at most ``_MAX_BOOTSTRAP_ELEMENTS_PER_BATCH`` drawn elements, so
    memory stays bounded for long measurements.
    """
    batch = max(1, _MAX_BOOTSTRAP_ELEMENTS_PER_BATCH // (xa.size + xb.size))
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, batch):
        rows = min(batch, n_resamples - start)
        med_a = np.median(xa[rng.integers(0, xa.size, (rows, xa.size))], axis=1)
        med_b = np.median(xb[rng.integers(0, xb.size, (rows, xb.size))], axis=1)
        out[start : start + rows] = med_a / med_b
    return out


def paired_median_ratio(
    a_round_medians: Samples,
    b_round_medians: Samples,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, float, float, float]:
    """Median of per-pair ratios ``a_i / b_i`` with its order-statistic CI and a sign-test p-value.

    For interleaved rounds on a machine whose speed changes in steps: a pair inside
    one speed state gives the true ratio whatever the state, and the few pairs that
    straddle a change are outliers the median ignores (they move a mean of ratios, or
    a ratio of pooled medians). The CI needs >= 6 pairs at 95% (else it is infinite);
    p is the two-sided sign test of "ratio = 1", ties at exactly 1 dropped.
    Returns ``(ratio, low, high, p)``.
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


def replicate_ratio_ci(ratios: Samples, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float, float, float]:
    """Geometric mean of independent replicate ratios with a Student-t CI and p-value on their logs.

    Each ratio comes from its own pair of processes, so their spread includes the
    offset that one pair of processes carries (memory layout) and that the rounds
    inside a pair cannot show. Returns ``(ratio, low, high, p)``; with fewer than 2
    ratios the bounds are infinite and p is 1.
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
    sem = float(logs.std(ddof=1)) / math.sqrt(logs.size)
    if sem == 0.0:
        return ratio, ratio, ratio, (1.0 if mean == 0.0 else 0.0)
    from scipy import special  # only the compare-ref confirmation gets here (see the imports)

    t = float(special.stdtrit(df, 0.5 + confidence / 2.0))
    p = 2.0 * float(special.stdtr(df, -abs(mean) / sem))
    return ratio, math.exp(mean - t * sem), math.exp(mean + t * sem), p


def mann_whitney_p(a: Samples, b: Samples) -> float:
    """Two-sided Mann-Whitney U p-value (1.0 when it cannot be computed, e.g. all values equal).

    The normal approximation with tie and continuity corrections, as scipy's
    ``mannwhitneyu`` computes it for samples of more than 8 or with ties; below
    that scipy's exact distribution is used (the approximation is poor there).
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
    p = 2.0 * _normal_sf(z)
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


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


# scipy's scale="normal" for the MAD: 1 / Phi^-1(3/4), so it estimates sigma for normal data
_MAD_TO_SIGMA = 1.0 / statistics.NormalDist().inv_cdf(0.75)


def _normal_scaled_mad(arr: np.ndarray) -> float:
    return _MAD_TO_SIGMA * float(np.median(np.abs(arr - np.median(arr))))


def between_run_noise(round_medians: Samples) -> float | None:
    """Relative spread of a median between rounds: a robust standard deviation over the median.

    The normal-scaled median absolute deviation of the round medians, divided
    by their median; ``None`` with fewer than 3 rounds (no estimate). Rounds of
    one run share a process, so this is a lower bound on the spread between
    processes; the gate multiplies it (``noise_multiplier``) and combines it
    with the threshold rather than trusting it alone.
    """
    if len(round_medians) < 3:
        return None
    arr = _as_array(round_medians, "between_run_noise")
    mid = float(np.median(arr))
    if mid <= 0:
        return None
    return _normal_scaled_mad(arr) / mid


# Croux & Rousseeuw (1992), "Time-efficient algorithms for two highly robust estimators
# of scale": factors that make the normal-scaled MAD of n values unbiased for small n
# (for n = 3 it averages 0.67 sigma without one). Beyond 9 values: n / (n - 0.8).
_MAD_SMALL_SAMPLE = {2: 1.196, 3: 1.495, 4: 1.363, 5: 1.206, 6: 1.200, 7: 1.140, 8: 1.129, 9: 1.107}


def between_process_noise(process_medians: Samples) -> float | None:
    """Relative spread of a median between independent processes (None with fewer than 2).

    The medians come from separate processes measuring the same test (a baseline's
    reading and its fresh-process checks, engine.py), so unlike round medians they
    include each process's own offset (memory layout, where its pages and threads
    landed). The normal-scaled MAD of their logs with its small-sample factor: with
    three readings one reading taken in a slow moment does not set it.
    """
    if len(process_medians) < 2:
        return None
    arr = _as_array(process_medians, "between_process_noise")
    if np.any(arr <= 0):
        raise ValueError("between_process_noise: medians must be positive")
    logs = np.log(arr)
    mad = _normal_scaled_mad(logs)
    n = logs.size
    return mad * _MAD_SMALL_SAMPLE.get(n, n / (n - 0.8))


def recorded_noise(round_medians: Samples, process_medians: Samples = ()) -> float | None:
    """The between-run noise a baseline records: the larger of the two estimates that exist.

    Rounds of one process only bound it from below (``between_run_noise``); the spread
    of independent processes is the estimate the gate wants, but from two or three
    readings it can come out small by chance, so the rounds' figure stays a floor.
    """
    known = [n for n in (between_run_noise(round_medians), between_process_noise(process_medians)) if n is not None]
    return max(known, default=None)


def noise_floor(baseline_noise: float | None, current_noise: float | None, multiplier: float) -> float:
    """Smallest relative change distinguishable from between-run noise.

    The difference of two independent medians has the root-sum-square of their
    spreads; a missing side is assumed as noisy as the known one; ``multiplier``
    is the number of standard deviations required (a one-sided z).
    """
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
