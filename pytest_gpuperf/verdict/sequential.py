"""A sequential test of replicate ratios against the threshold: beyond it, within it, or not resolved.

Compare-ref's fresh process pairs are measured one at a time, and after each (from the third on, when a
t interval first exists) the pairs so far are looked at. Looking at growing data many times gives luck
many chances to cross a line, so each look decides at a level of its own, spent from the error rate a
single look would have (Lan and DeMets' alpha spending over the information fraction ``n / last``):

* **beyond** (a regression of more than the threshold): the lower bound ``exp(mean - c_n se)`` lies
  above ``1 + threshold``; the boundaries ``c_n`` spend the error as ``alpha * (n / last) ** 2`` (Kim and
  DeMets' power family), little at the early looks and most of it at the last, which keeps the last look's
  power (a 3% slowdown past a 2% threshold in 97% of confirmations where pairs spread by 0.73%) while a
  large change still ends early (10% in 3.4 pairs; O'Brien-Fleming's spending took 4.5 and caught 98%);
* **within** (no change of the threshold's size): the upper bound ``exp(mean + w_n se)`` lies below
  ``1 + threshold``; the boundaries ``w_n`` spend the error in Pocock's way, more of it early, so that
  unchanged code stops after few pairs;
* **not resolved**: neither, at the last look (the budget).

``se`` is the spread of the pairs' log ratios over ``sqrt(n)``, never below their own measurement errors
(``stats.replicate_spread``). Each boundary is set so that a change of exactly the threshold crosses it,
at any look, with the stated probability (one-sided), each side its own: with 2.5% on the beyond side
and 10% on the within side (verdict/pairs.py), a change of the threshold fails at most 2.5% of the time
and is called within at most 10% of the time, and the further a change lies from the threshold the rarer
the wrong outcome. The boundaries are those of the t statistic
of normal log ratios, whose law does not depend on the unknown spread; no formula gives them for a
t statistic looked at repeatedly, so they are found once per design by a seeded simulation of that
statistic (``boundaries``), each look's crossing probability matched to its share of ``alpha``.
Where a share is too small for the simulation to place (fewer than ``_MIN_CROSSINGS`` of its paths
would cross), the look's own t quantile is used instead: the union bound, which can only make it stricter.
A floor on the spread only shrinks the statistic, so it keeps the rates. docs/statistics.md gives the figures.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_gpuperf import stats

FIRST_LOOK = 3  # the fewest ratios with a t interval worth the name (2 degrees of freedom)
_PATHS = 100_000  # simulated paths per design: a share of 0.3% of alpha is placed to about +-6% of itself
_MIN_CROSSINGS = 100  # below this many crossing paths a look's boundary is the union bound's t quantile
_SEED = 20261128


class Outcome(str, enum.Enum):
    """Where the ratio stands against ``1 + threshold`` at a look."""

    BEYOND = "beyond"
    WITHIN = "within"
    OPEN = "not resolved"


@dataclass(frozen=True)
class Look:
    """One look at ``readings`` ratios: the estimate, the interval the outcome was read from, and the outcome.

    ``low`` is the beyond boundary's bound, ``high`` the within boundary's: the two spend different shares of
    the error at each look, so the interval is not symmetric in t units. Infinite bounds before the first look.
    """

    outcome: Outcome
    ratio: float
    low: float
    high: float
    readings: int
    spread: float  # the standard deviation of the log ratios the look used (its floor included)
    final: bool  # the design's last look: an open outcome stays open


BEYOND_POWER = 2.0  # the exponent of the beyond side's spending (module docstring)


def power_family(fraction: float, alpha: float) -> float:
    """Kim-DeMets' power-family spending: the one-sided error spent by information ``fraction``."""
    return alpha * fraction**BEYOND_POWER


def pocock(fraction: float, alpha: float) -> float:
    """Lan-DeMets' Pocock-type spending: more of the error early than ``power_family``."""
    return alpha * math.log(1.0 + (math.e - 1.0) * fraction)


@functools.cache
def _t_paths(first: int, last: int) -> np.ndarray:
    """The t statistic of ``_PATHS`` simulated series of standard normal values after ``first .. last`` of them."""
    z = np.random.default_rng(_SEED).standard_normal((_PATHS, last))
    n = np.arange(1, last + 1)
    sums, squares = np.cumsum(z, axis=1), np.cumsum(z * z, axis=1)
    mean = sums / n
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.maximum(squares - n * mean * mean, 0.0) / (n - 1))
        t = mean / sd * np.sqrt(n)
    return np.ascontiguousarray(t[:, first - 1 :])


@functools.cache
def boundaries(first: int, last: int, alpha: float, early: bool) -> tuple[float, ...]:
    """The t boundaries of the looks at ``first .. last`` ratios, one-sided error ``alpha`` in all.

    ``early``: Pocock-type spending (the within side), else the power family's (beyond). Computed by
    simulating the t statistic of normal data (module docstring); seeded, so a design always gets the same.
    """
    from scipy import special  # the t quantile; only a confirmation gets here

    spend = pocock if early else power_family
    paths = _t_paths(first, last)
    alive = np.ones(_PATHS, dtype=bool)
    spent = 0.0
    out = []
    for i, n in enumerate(range(first, last + 1)):
        total = spend(n / last, alpha)
        share, spent = total - spent, total
        union = float(special.stdtrit(n - 1, 1.0 - share))
        crossing = round(share * _PATHS)
        t = paths[alive, i]
        c = union
        if crossing >= _MIN_CROSSINGS and crossing < t.size:
            c = min(union, float(-np.partition(-t, crossing)[crossing]))
        out.append(c)
        alive[alive] = t <= c
    return tuple(out)


def look(
    ratios: Sequence[float], threshold: float, last: int, alpha: float, errors: Sequence[float] = (),
    alpha_within: float | None = None,
) -> Look:  # fmt: skip
    """The look at ``ratios`` (oriented: the change of interest reads above 1) for a design of ``last`` looks.

    ``threshold``: relative (0.02); ``alpha``: the one-sided error rate at the threshold of the beyond side
    (a change of the threshold called beyond), ``alpha_within`` of the within side (called within; ``alpha``
    where not given); ``errors``: each ratio's own standard error (log scale), a floor on their spread.
    """
    n = len(ratios)
    ratio = math.exp(sum(math.log(r) for r in ratios) / n) if n else 1.0
    last = max(last, FIRST_LOOK)
    if n < FIRST_LOOK:
        return Look(Outcome.OPEN, ratio, -math.inf, math.inf, n, math.nan, final=False)
    spread = stats.replicate_spread(ratios, errors)[0]
    index = min(n, last) - FIRST_LOOK
    c = boundaries(FIRST_LOOK, last, alpha, early=False)[index]
    w = boundaries(FIRST_LOOK, last, alpha if alpha_within is None else alpha_within, early=True)[index]
    se = spread / math.sqrt(n)
    low, high = ratio * math.exp(-c * se), ratio * math.exp(w * se)
    limit = 1.0 + threshold
    outcome = Outcome.BEYOND if low > limit else Outcome.WITHIN if high < limit else Outcome.OPEN
    return Look(outcome, ratio, low, high, n, spread, final=n >= last)
