"""The minimum detectable change of a time comparison: what its evidence can tell from no change.

For a normal estimate of the log change with standard error ``se``, a gate that calls a change once it
exceeds ``z_alarm * se`` (its false-alarm control: the interval's level, or baseline mode's noise floor)
tells a true change ``d`` from none with probability ``POWER`` once ``d >= (z_alarm + z_power) se``. That is
the published value: the threshold is *resolved* where it is at least that large, so that unchanged code
lands within it and a change of twice the threshold beyond it, each with probability ``POWER`` or more
(docs/statistics.md). ``needed`` is how many readings of the kind that decided (round pairs, fresh pairs,
samples) would bring it down to the threshold; where more of them cannot (baseline mode's recorded noise
between runs), None and the reason.

* compare-ref's first pair: the standard error its rounds' interval stands for. The rounds share a pair of
  processes, so this is what that pair resolves; the offset between processes, which it cannot see, is
  what the screen at half the threshold and the fresh pairs are for (rules.Screen).
* compare-ref's fresh pairs: their spread over ``sqrt(n)``; the alarm's quantile is the sequential test's
  at the last look its budget allows (the stricter of its two sides: verdict/sequential.py), the power's
  Student's for ``n - 1`` degrees.
* baseline mode: the bootstrap interval's standard error and the recorded noise between runs (the noise
  floor's ``k`` standing for the interval's quantile, since that is the control the gate applies).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from pytest_gpuperf.model import Detectable, Verdict
from pytest_gpuperf.verdict.case import Case, Evidence
from pytest_gpuperf.verdict.pairs import within_error_rate
from pytest_gpuperf.verdict.rules import RecordedNoise
from pytest_gpuperf.verdict.sequential import FIRST_LOOK, boundaries

POWER = 0.8  # the probability with which the published change is told from none
_MAX_READINGS = 100_000  # the search for the readings a threshold needs stops here
ROUND_PAIRS = "round pairs"
FRESH_PAIRS = "fresh pairs"
SAMPLES = "samples"
NOISE_LIMIT = "the noise between runs recorded with the baseline and measured now"


def detectable(case: Case, threshold: float) -> Detectable | None:
    """The detectable change of ``case``'s time evidence against ``threshold``; None without evidence."""
    ev = case.evidence
    if ev is None or ev.readings < 2:
        return None
    alpha = (1.0 - case.settings.confidence) / 2.0
    if ev.spread is not None:
        within = within_error_rate(case.settings.confidence, case.suspicion is Verdict.IMPROVEMENT)
        return from_replicates(ev.spread, ev.readings, threshold, alpha, case.settings.confirm_pairs, within)
    z = NormalDist().inv_cdf(1.0 - alpha)
    se = _interval_se(ev, z)
    if se is None:
        return None
    noise = RecordedNoise.of(case) if not ev.paired else None
    if noise is None or noise.floor <= 0.0:
        return from_interval(se, ev.readings, threshold, z, ROUND_PAIRS if ev.paired else SAMPLES)
    return from_noise(se, ev.readings, threshold, z, noise.floor / case.settings.noise_multiplier,
                      case.settings.noise_multiplier)  # fmt: skip


def _interval_se(ev: Evidence, z: float) -> float | None:
    """The standard error (log scale) an interval at two-sided quantile ``z`` stands for."""
    if not (math.isfinite(ev.low) and math.isfinite(ev.high)) or ev.low <= 0 or ev.high < ev.low:
        return None
    return (math.log(ev.high) - math.log(ev.low)) / (2.0 * z)


def _z_power() -> float:
    return NormalDist().inv_cdf(POWER)


def from_interval(se: float, readings: int, threshold: float, z: float, reading: str) -> Detectable:
    """An interval's detectable change; ``se`` shrinks as one over the root of the readings."""
    factor = z + _z_power()
    needed = _scaled(readings, factor * se, math.log1p(threshold))
    return Detectable(_relative(factor * se), threshold, POWER, readings, reading, needed)


def from_replicates(
    spread: float, readings: int, threshold: float, alpha: float, budget: int, alpha_within: float | None = None
) -> Detectable:
    """Fresh pairs' detectable change: the last look's boundary of a confirmation of ``budget`` pairs (its
    design's, the stricter side's; taken for any count, the boundary changes little with the budget) and
    Student's power quantile."""
    from scipy import special  # only a confirmation gets here

    last = max(budget, readings, FIRST_LOOK)
    within = alpha if alpha_within is None else alpha_within
    alarm = max(boundaries(FIRST_LOOK, last, alpha, False)[-1], boundaries(FIRST_LOOK, last, within, True)[-1])

    def margin(n: int) -> float:
        return (alarm + float(special.stdtrit(n - 1, POWER))) * spread / math.sqrt(n)

    log_threshold = math.log1p(threshold)
    needed = next((n for n in range(3, _MAX_READINGS) if margin(n) <= log_threshold), None)
    return Detectable(_relative(margin(readings)), threshold, POWER, readings, FRESH_PAIRS, needed)


def from_noise(se: float, readings: int, threshold: float, z: float, between: float, k: float) -> Detectable:
    """Baseline mode: the gate calls a change past ``k`` times the noise between runs (``between``, the
    root-sum-square of both sides') and past its interval; the estimate errs by both."""
    z_power = _z_power()

    def margin(sampling: float) -> float:
        return max(k * between, z * sampling) + z_power * math.hypot(between, sampling)

    log_threshold = math.log1p(threshold)
    if margin(0.0) > log_threshold:
        return Detectable(_relative(margin(se)), threshold, POWER, readings, SAMPLES, None, NOISE_LIMIT)
    if margin(se) <= log_threshold:
        return Detectable(_relative(margin(se)), threshold, POWER, readings, SAMPLES, readings)
    low, high = 0.0, se  # the largest sampling error that resolves the threshold, by bisection
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if margin(mid) <= log_threshold else (low, mid)
    needed = min(_MAX_READINGS, math.ceil(readings * (se / low) ** 2)) if low > 0 else None
    return Detectable(_relative(margin(se)), threshold, POWER, readings, SAMPLES, needed)


def _scaled(readings: int, margin: float, target: float) -> int | None:
    """Readings that bring a margin shrinking as ``1 / sqrt(readings)`` down to ``target``."""
    if margin <= target:
        return readings
    if target <= 0:
        return None
    return min(_MAX_READINGS, math.ceil(readings * (margin / target) ** 2))


def _relative(log_change: float) -> float:
    return math.expm1(log_change)
