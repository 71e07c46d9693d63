"""The one mechanism that decides how many independent readings a verdict needs (readings.py)."""

from __future__ import annotations

import pytest

from pytest_gpuperf.verdict import readings


def take_from(values: list[float | None]):  # type: ignore[no-untyped-def]
    taken: list[int] = []

    def take(i: int) -> float | None:
        taken.append(i)
        return values[i]

    return take, taken


def test_readings_are_taken_wave_by_wave_until_decided() -> None:
    take, taken = take_from([1.0, 2.0, 3.0, 4.0, 5.0])
    got = readings.take_readings(take, (2, 3, 5), lambda rs, planned: planned == 3)
    assert got == [1.0, 2.0, 3.0] and taken == [0, 1, 2]


def test_readings_that_could_not_be_taken_count_as_taken_and_the_last_wave_is_the_budget() -> None:
    take, taken = take_from([1.0, None, 3.0, 4.0, None])
    got = readings.take_readings(take, (2, 3, 5), lambda rs, planned: False)
    assert got == [1.0, 3.0, 4.0] and taken == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("medians", "done"),
    [
        ([1000.0, 1040.0], True),  # two that agree within half the 10% threshold
        ([1000.0, 1100.0], False),  # they do not: a third decides
        ([1600.0, 1000.0, 1020.0], True),  # one slow reading of three does not set the noise
        ([1000.0, 1100.0, 1200.0], False),  # a spread that would raise the threshold past 1.5x: two more
        ([1000.0], True),  # no fresh reading could be taken
    ],
)
def test_a_baseline_write_stops_once_its_readings_settle_the_entry(medians: list[float], done: bool) -> None:
    assert readings.baseline_write_done(0.10, 3.0)(medians, len(medians)) is done


def test_a_busy_write_takes_no_readings_past_the_decider() -> None:
    noisy = [1000.0, 1300.0, 1600.0]
    assert not readings.baseline_write_done(0.10, 3.0)(noisy, 3)  # quiet: two more readings
    assert readings.baseline_write_done(0.10, 3.0)(noisy, 3, True)  # busy: the load's spread, written busy
    assert not readings.baseline_write_done(0.10, 3.0)([1000.0, 1300.0], 2, True)  # the decider is still taken


def test_the_written_reading_is_the_first_of_two_or_the_median_one() -> None:
    assert readings.chosen_reading([1000.0, 1040.0]) == 0
    assert readings.chosen_reading([1600.0, 1000.0, 1020.0]) == 2
    assert readings.chosen_reading([1000.0, 1300.0, 1600.0, 1150.0, 1450.0]) == 1


def test_a_baseline_confirmation_stops_at_the_first_reading_that_is_not_a_regression() -> None:
    done = readings.remeasure_done(lambda r: r > 1.1)
    take, taken = take_from([1.5, 1.0, 1.5])
    assert readings.take_readings(take, readings.remeasure_waves(3), done) == [1.5, 1.0] and taken == [0, 1]


def test_one_answer_to_how_much_a_spread_raises_the_threshold() -> None:
    from pytest_gpuperf import stats

    medians, rounds = [100.0, 112.0, 125.0], [100.0, 101.0, 99.0, 100.5, 99.5, 100.2]
    expected = stats.noise_floor(stats.recorded_noise(rounds, medians), 0.0, 3.0)
    assert readings.spread_threshold(medians, 3.0, rounds) == expected
    assert readings.spread_threshold(medians, 3.0) == stats.noise_floor(stats.between_process_noise(medians), 0.0, 3.0)
    assert readings.too_noisy(0.16, 0.10) and not readings.too_noisy(0.15, 0.10)


def test_a_check_takes_as_many_samples_as_its_median_needs() -> None:
    # noise_multiplier (3) times the median's standard error within a quarter of the 10% threshold
    steady = [1000.0 + d for d in (-10.0, -5.0, 0.0, 5.0, 10.0, -7.0, 7.0)]  # about 1% apart
    assert readings.check_samples(steady, 0.10, 3.0) == readings.CHECK_MIN_SAMPLES
    spread = [1000.0 * (1 + d) for d in (-0.03, -0.015, 0.0, 0.015, 0.03, -0.02, 0.02)]  # about 2.2%
    assert readings.check_samples(spread, 0.10, 3.0) > 6  # more than a long call's full measurement takes
    assert readings.check_samples(spread, 0.30, 3.0) == readings.CHECK_MIN_SAMPLES  # a wider threshold needs fewer
    assert readings.check_samples([1000.0, 1010.0], 0.10, 3.0) is None  # no spread to go by: a full measurement


def test_a_check_that_is_the_median_is_not_written_the_nearest_full_reading_is() -> None:
    assert readings.chosen_reading([1000.0, 1030.0, 1100.0], checks=[1]) == 0
    assert readings.chosen_reading([1000.0, 1080.0, 1100.0], checks=[1]) == 2
    assert readings.chosen_reading([1000.0, 1100.0, 1030.0], checks=[1]) == 2  # the median is a full reading
