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


def test_a_busy_write_ends_at_its_check_agreeing_or_not() -> None:
    noisy = [1000.0, 1300.0, 1600.0]
    assert not readings.baseline_write_done(0.10, 3.0)(noisy, 3)  # quiet: two more readings
    assert not readings.baseline_write_done(0.10, 3.0)([1000.0, 1300.0], 2)  # quiet: a decider
    assert readings.baseline_write_done(0.10, 3.0)([1000.0, 1300.0], 2, True)  # busy: no decider, written busy
    assert readings.baseline_write_done(0.10, 3.0)([1000.0, 1040.0], 2, True)
