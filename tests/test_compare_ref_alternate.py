"""The alternation loop and its stopping rules, driven by plain round functions (no processes)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import pytest

from pytest_gpuperf.config import DEFAULT_MIN_SAMPLES, MeasureSettings
from pytest_gpuperf.engines.compare_ref.alternate import MIN_PAIRS, alternate, round_seconds
from pytest_gpuperf.measure.stopping import Stop


def side(per_call: float, *, speed: Callable[[int], float] = lambda i: 1.0, sleep_s: float = 0.0):
    """A round function: 5 samples of ``per_call`` scaled by the machine's speed at this round."""
    calls = itertools.count()
    order: list[int] = []

    def round_fn(budget_s: float) -> list[float]:
        i = next(calls)
        order.append(i)
        if sleep_s:
            time.sleep(sleep_s)
        return [per_call * speed(i) * (1 + 0.001 * k) for k in range(5)]

    return round_fn


def test_stops_once_the_median_pair_ratio_is_precise_and_keeps_abba_order() -> None:
    seen: list[str] = []
    head_fn, base_fn = side(103.0), side(100.0)

    def head(b: float) -> list[float]:
        seen.append("h")
        return head_fn(b)

    def base(b: float) -> list[float] | None:
        seen.append("b")
        return base_fn(b)

    result = alternate(head, base, MeasureSettings(min_time_s=0.0, max_time_s=60.0))
    assert result.complete
    assert result.pairs == MIN_PAIRS  # identical pairs: precise as soon as allowed
    assert "".join(seen[:8]) == "hbbhhbbh"
    assert all(h / b == 1.03 for h, b in zip(result.head_rounds, result.base_rounds, strict=True))


def test_speed_steps_inside_some_pairs_do_not_move_the_estimate() -> None:
    # one clock for both sides: the machine is 1.7x slower during global rounds 9-20,
    # so pair 4 (rounds 8, 9) straddles the first step
    clock = itertools.count()

    def on_machine(per_call: float) -> Callable[[float], list[float]]:
        def round_fn(budget_s: float) -> list[float]:
            speed = 1.7 if 9 <= next(clock) <= 20 else 1.0
            return [per_call * speed] * 5

        return round_fn

    settings = MeasureSettings(min_time_s=0.0, max_time_s=60.0, target_precision=0.001)
    result = alternate(on_machine(103.0), on_machine(100.0), settings)
    ratios = [h / b for h, b in zip(result.head_rounds, result.base_rounds, strict=True)]
    assert result.pairs >= MIN_PAIRS
    assert any(abs(r - 1.03) > 0.3 for r in ratios)  # the straddling pairs are far off
    assert sorted(ratios)[len(ratios) // 2] == 1.03


def test_both_sides_count_against_one_budget() -> None:
    settings = MeasureSettings(min_time_s=0.0, max_time_s=0.06, target_precision=0.001, min_samples=1)
    result = alternate(side(1.0, sleep_s=0.01), side(1.0, sleep_s=0.01), settings)
    assert result.complete and result.stop is Stop.BUDGET
    assert 1 <= result.pairs <= 3  # 20 ms a pair: the shared 60 ms run out after 3 pairs at most


def test_slow_rounds_go_on_past_the_budget_to_min_samples_pairs() -> None:
    # 20 ms a pair: the 40 ms budget is spent after two pairs, far from the precision stop
    settings = MeasureSettings(min_time_s=0.0, max_time_s=0.04, target_precision=1e-9)
    assert settings.min_samples == DEFAULT_MIN_SAMPLES < MIN_PAIRS
    result = alternate(side(1.0, sleep_s=0.01), side(1.0, sleep_s=0.01), settings)
    assert result.complete and result.stop is Stop.BUDGET
    assert result.pairs == DEFAULT_MIN_SAMPLES
    assert result.note == ""


def test_the_time_limit_stops_pairs_short_of_min_samples_with_a_note() -> None:
    # 20 ms a pair, a 50 ms limit: 6 pairs cannot fit, and no pair starts that would end past it
    settings = MeasureSettings(min_time_s=0.0, max_time_s=0.04, time_limit_s=0.05)
    result = alternate(side(1.0, sleep_s=0.01), side(1.0, sleep_s=0.01), settings)
    assert result.complete and result.stop is Stop.LIMIT
    assert 1 <= result.pairs < DEFAULT_MIN_SAMPLES
    assert result.note == (
        f"{result.pairs} pair{'s' if result.pairs > 1 else ''}, fewer than the 6 a verdict needs, "
        "within the 0.05 s time limit (--gpuperf-time-limit)"
    )


def test_time_spent_before_the_rounds_counts_against_the_limit() -> None:
    settings = MeasureSettings(min_time_s=0.0, max_time_s=0.04, time_limit_s=10.0)
    result = alternate(side(1.0), side(1.0), settings, spent_s=10.0)
    assert result.stop is Stop.LIMIT and result.pairs == 1  # the first pair always runs


def test_a_side_that_stops_ends_the_alternation_incomplete() -> None:
    rounds = itertools.count()
    result = alternate(side(1.0), lambda b: None if next(rounds) == 2 else [1.0], MeasureSettings())
    assert not result.complete
    assert result.pairs == 2


def test_rounds_are_short_and_clamped() -> None:
    assert round_seconds(MeasureSettings(max_time_s=2.0)) == 0.025
    assert round_seconds(MeasureSettings(min_time_s=0.0, max_time_s=0.1)) == 0.005


def test_a_pair_that_lets_the_base_lead_starts_baab() -> None:
    from pytest_gpuperf.engines.compare_ref.confirm import base_leads

    seen: list[str] = []

    def head(b: float) -> list[float]:
        seen.append("h")
        return [103.0] * 5

    def base(b: float) -> list[float]:
        seen.append("b")
        return [100.0] * 5

    alternate(head, base, MeasureSettings(min_time_s=0.0, max_time_s=60.0), base_first=True)
    assert "".join(seen[:8]) == "bhhbbhhb"
    # fresh pairs take turns: whatever leading carries lands on each side in half of them
    assert [base_leads(j) for j in range(6)] == [False, True, False, True, False, True]


def test_a_quiet_test_stops_as_soon_as_its_ratio_is_resolved_a_noisy_one_runs_its_budget() -> None:
    from pytest_gpuperf.verdict.rules import resolved_against

    settings = MeasureSettings(min_time_s=0.0, max_time_s=0.3, target_precision=1e-9)  # no precision stop
    resolved = resolved_against(0.02, confirming=True)
    quiet = alternate(side(100.2), side(100.0), settings, resolved=resolved)  # +0.2%, rounds alike
    assert quiet.stop is Stop.RESOLVED and quiet.pairs == MIN_PAIRS

    # rounds up to 3% apart around the screen's boundary itself (+1%): their interval always spans it
    jitter = itertools.cycle([0.97, 1.03, 0.99, 1.01, 0.98, 1.02])
    noisy = alternate(side(100.0 * 1.02**0.5, speed=lambda i: next(jitter), sleep_s=0.002), side(100.0), settings,
                      resolved=resolved)  # fmt: skip
    assert noisy.stop is Stop.BUDGET and noisy.pairs > MIN_PAIRS


def test_without_fresh_pairs_the_rounds_resolve_against_the_threshold_itself() -> None:
    from pytest_gpuperf.verdict.rules import resolved_against, screen_boundary

    assert screen_boundary(0.02) == pytest.approx(1.02**0.5)
    screening, alone = resolved_against(0.02, confirming=True), resolved_against(0.02, confirming=False)
    assert not screening(1.008, 1.012) and screening(1.011, 1.015)  # across +1% (half of +2%, log scale)
    assert alone(1.008, 1.012) and not alone(1.018, 1.022)  # across +2%
    assert not alone(0.975, 0.985)  # across -2%: an improvement the rounds would report
