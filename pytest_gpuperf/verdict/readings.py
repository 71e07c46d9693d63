"""How many independent readings a verdict needs: one sequential plan for every purpose.

A *reading* is one measurement in its own process (in compare-ref, a pair of them): only readings
from different processes show the noise between runs. ``take_readings`` takes them in waves, each
followed by a rule that says whether they decide: writing a baseline (``baseline_write_done``),
confirming a baseline-mode suspicion (``remeasure_done``) or a compare-ref one (``verdict/pairs.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

from pytest_gpuperf import stats
from pytest_gpuperf.model import Measurement

T = TypeVar("T")

NOISY_WRITE_FACTOR = 1.5  # a baseline whose readings raise its threshold past this many times takes more
WRITE_WAVES = (2, 3, 5)  # readings of a baseline write: a check, a decider, two more for a noisy one
# On a busy runner whose contention could not be taken out (correction_holds), a baseline write ends at its
# check (baseline_write_done says why); the write note says so.
BUSY_WRITE_ENDS = "the runner was busy: the check ends the write, no deciding reading is taken"
CHECK_READING = 1  # the write's first fresh reading only compares with the session's; the others may be written
CHECK_MIN_SAMPLES = 3  # the fewest samples whose median is not one sample's
# A check's median error, times the noise multiplier, may take at most this share of the threshold:
# its sampling error enters the entry's recorded noise, and so the noise floor k * noise.
CHECK_ERROR_SHARE = 0.25


def take_readings(
    take: Callable[[int], T | None], waves: Sequence[int], done: Callable[[list[T], int], bool]
) -> list[T]:
    """Readings wave by wave until ``done(readings, planned)`` or the last wave.

    ``take(i)`` measures reading ``i`` (None: it could not, and counts as taken);
    ``planned`` is the cumulative count the wave just finished aimed for.
    """
    readings: list[T] = []
    index = 0
    for planned in waves:
        while index < planned:
            reading = take(index)
            index += 1
            if reading is not None:
                readings.append(reading)
        if done(readings, planned):
            break
    return readings


# -- confirming a baseline-mode suspicion ----------------------------------------------------


def remeasure_waves(remeasures: int) -> tuple[int, ...]:
    return tuple(range(1, remeasures + 1))


def remeasure_done(still_regressed: Callable[[T], bool]) -> Callable[[list[T], int], bool]:
    """Stop at the first reading that is not a regression."""
    return lambda readings, planned: not readings or not still_regressed(readings[-1])


# -- writing a baseline -------------------------------------------------------------------


def baseline_write_done(threshold: float, noise_multiplier: float) -> Callable[[list[float], int, bool], bool]:
    """The stopping rule over the readings' medians of one baseline write; ``busy``: the runner was busy.

    Two that agree within half the threshold settle it; otherwise a third decides (the
    median is written), and two more while the readings are ``too_noisy`` on a quiet runner.
    On a busy runner the check settles it, agreeing or not (``BUSY_WRITE_ENDS``): readings taken
    under load spread by the load, and a decider, a full measurement in a new process with the
    test's set-up run again, costs as much as the session's own reading; neither it nor two more
    can make the entry one to trust (it is written busy, to be written again in a quieter hour).
    The two medians are its recorded noise, so a check that disagrees raises the entry's threshold
    (``spread_threshold``), and past the cap the entry says it cannot gate (the noisy-baseline rule).
    """

    def done(medians: list[float], planned: int, busy: bool = False) -> bool:
        if len(medians) < 2:
            return True  # no fresh reading could be taken: keep what there is
        if busy:
            return True  # BUSY_WRITE_ENDS
        if len(medians) == 2:
            return agree(medians, threshold)
        return not too_noisy(spread_threshold(medians, noise_multiplier), threshold)

    return done


def agree(medians: Sequence[float], threshold: float) -> bool:
    """The first two readings agree: within half the threshold of each other."""
    return abs(medians[1] / medians[0] - 1.0) <= threshold / 2


def spread_threshold(medians: Sequence[float], noise_multiplier: float, round_medians: Sequence[float] = ()) -> float:
    """The threshold that the entry's recorded noise alone sets (stats.recorded_noise through stats.noise_floor).

    Asked by the write plan of the readings' medians, by the write note of the kept rounds and medians.
    """
    return stats.noise_floor(stats.recorded_noise(round_medians, medians), 0.0, noise_multiplier)


def too_noisy(raised: float, threshold: float) -> bool:
    """A threshold raised past ``NOISY_WRITE_FACTOR`` times the configured one: the readings were noisy."""
    return raised > NOISY_WRITE_FACTOR * threshold


def check_samples(samples_ns: Sequence[float], threshold: float, noise_multiplier: float) -> int | None:
    """How many samples of a long call the write's check takes (``CHECK_READING``): it only compares medians.

    The fewest, at least ``CHECK_MIN_SAMPLES``, whose median's standard error (sqrt(pi / 2) sigma /
    sqrt(n) for n samples of spread sigma), predicted from the session reading's own samples
    (``samples_ns``), keeps ``noise_multiplier`` times it within ``CHECK_ERROR_SHARE`` of the threshold:
    3 where calls spread by 1%, 10 (more than a full measurement of a long call takes) where they spread by 2%.
    None (a full measurement) where the session's reading has too few samples to show its spread.
    """
    # the samples' relative spread, as the rounds' is figured: a normal-scaled MAD over the median
    sigma = stats.between_run_noise(samples_ns) if len(samples_ns) >= CHECK_MIN_SAMPLES else None
    if sigma is None:
        return None
    allowed = CHECK_ERROR_SHARE * threshold / noise_multiplier
    return max(CHECK_MIN_SAMPLES, math.ceil(math.pi / 2 * (sigma / allowed) ** 2))


def correction_holds(m: Measurement, threshold: float) -> bool:
    """Whether ``m``'s times less their run-queue wait are known closely enough to write or check a baseline:
    accounted, and the correction uncertain by no more than ``CHECK_ERROR_SHARE`` of the threshold."""
    return m.scheduling is not None and m.corrected.uncertainty <= CHECK_ERROR_SHARE * threshold


def chosen_reading(medians: Sequence[float], checks: Collection[int] = ()) -> int:
    """Which reading a baseline is written from: the first of two that agree, else the median one.

    A check (``checks``: their indices) has too few samples to be written: where it is the median,
    the reading written is the one nearest to it among the others.
    """
    if len(medians) <= 2:
        return 0
    middle = sorted(range(len(medians)), key=medians.__getitem__)[len(medians) // 2]
    if middle not in checks:
        return middle
    full = [i for i in range(len(medians)) if i not in checks]
    return min(full, key=lambda i: abs(medians[i] - medians[middle]))
