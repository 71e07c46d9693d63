"""The sequential test against the threshold (verdict/sequential.py): its boundaries, its looks, and its error
rates at the threshold with the stopping, simulated (seeded) through the same looks the engine takes."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy import stats as scipy_stats

from pytest_gpuperf.verdict.sequential import FIRST_LOOK, Outcome, boundaries, look, pocock, power_family

LAST = 12
ALPHA = 0.025


def test_each_side_spends_its_whole_error_by_the_last_look_the_within_side_earlier() -> None:
    assert power_family(1.0, ALPHA) == pytest.approx(ALPHA) and pocock(1.0, ALPHA) == pytest.approx(ALPHA)
    assert pocock(0.25, ALPHA) > power_family(0.25, ALPHA)


def test_boundaries_narrow_look_by_look_and_the_first_is_its_shares_t_quantile() -> None:
    for early, spend in ((False, power_family), (True, pocock)):
        c = boundaries(FIRST_LOOK, LAST, ALPHA, early)
        assert len(c) == LAST - FIRST_LOOK + 1
        assert all(a > b for a, b in itertools.pairwise(c))
        share = spend(FIRST_LOOK / LAST, ALPHA)
        assert c[0] == pytest.approx(scipy_stats.t.ppf(1 - share, FIRST_LOOK - 1))
        # the last look is stricter than a single look would be, not by much where little was spent before
        assert c[-1] > scipy_stats.t.ppf(1 - ALPHA, LAST - 1)
    assert boundaries(FIRST_LOOK, LAST, ALPHA, False) == boundaries(FIRST_LOOK, LAST, ALPHA, False)


def test_a_look_needs_three_ratios() -> None:
    early = look([1.5, 1.5], 0.02, LAST, ALPHA)
    assert early.outcome is Outcome.OPEN and early.low == -math.inf and not early.final


def test_a_look_reads_beyond_within_or_open_and_knows_the_last_one() -> None:
    assert look([1.10, 1.09, 1.11, 1.095], 0.02, LAST, ALPHA).outcome is Outcome.BEYOND
    assert look([1.006, 0.993, 1.004, 0.997], 0.02, LAST, ALPHA).outcome is Outcome.WITHIN
    straddling = look([1.03, 1.01, 1.025, 1.015], 0.02, LAST, ALPHA)
    assert straddling.outcome is Outcome.OPEN and straddling.low < 1.02 < straddling.high
    assert look([1.0] * LAST, 0.02, LAST, ALPHA).final


def _sequence(change: float, spread: float, rng: random.Random, within: float = ALPHA) -> tuple[Outcome, int]:
    """One confirmation's outcome and pairs, its ratios drawn one at a time until a look decides."""
    ratios: list[float] = []
    for n in range(1, LAST + 1):
        ratios.append(math.exp(rng.gauss(math.log1p(change), spread)))
        if n >= FIRST_LOOK:
            seen = look(ratios, 0.02, LAST, ALPHA, alpha_within=within)
            if seen.outcome is not Outcome.OPEN or seen.final:
                return seen.outcome, n
    raise AssertionError("unreachable: the last look is final")


@pytest.mark.parametrize(("spread", "within_rate"), [(0.005, ALPHA), (0.015, ALPHA), (0.01, 4 * ALPHA)])
def test_a_change_of_exactly_the_threshold_is_on_either_wrong_side_no_more_often_than_stated(
    spread: float, within_rate: float
) -> None:
    rng = random.Random(20261128)
    runs = [_sequence(0.02, spread, rng, within_rate)[0] for _ in range(4000)]
    beyond = runs.count(Outcome.BEYOND) / len(runs)
    within = runs.count(Outcome.WITHIN) / len(runs)

    def bound(rate: float) -> float:  # three standard errors of a share above the stated rate
        return rate + 3 * math.sqrt(rate * (1 - rate) / len(runs))

    assert beyond <= bound(ALPHA) and within <= bound(within_rate)
    assert beyond + within > 0  # the test does decide now and then: it is no test that cannot fail


def test_unchanged_code_never_fails_and_stops_early_where_pairs_agree() -> None:
    rng = random.Random(7)
    quiet = [_sequence(0.0, 0.005, rng) for _ in range(500)]
    assert all(outcome is Outcome.WITHIN for outcome, _ in quiet)
    assert sum(n for _, n in quiet) / len(quiet) < 5  # about four pairs, not the budget of twelve
    noisy = [_sequence(0.0, 0.03, rng) for _ in range(200)]  # pairs spread by more than the threshold
    assert sum(outcome is Outcome.BEYOND for outcome, _ in noisy) / len(noisy) <= ALPHA
    assert sum(n == LAST for _, n in noisy) / len(noisy) > 0.5  # spread too far: most run to the budget


def test_a_change_well_past_the_threshold_is_caught_and_early() -> None:
    rng = random.Random(11)
    runs = [_sequence(0.10, 0.0073, rng) for _ in range(300)]
    assert all(outcome is Outcome.BEYOND for outcome, _ in runs)
    assert sum(n for _, n in runs) / len(runs) < 4
