"""How many independent readings a verdict needs: one sequential plan for every purpose.

A *reading* is one measurement taken in its own process (or, in compare-ref, one
pair of processes): where a process's code and data land in memory gives it an
offset of its own, so only readings from different processes show the noise
between runs, and rounds inside one process cannot. Three decisions need such
readings, and each takes them with the same mechanism, ``take_readings``: a plan
of waves (cumulative counts), after each wave a stopping rule that says whether
the readings so far decide the question, and a budget (the last wave).

* **Writing a baseline** (``baseline_write_done``): two readings that agree within
  half the threshold settle the entry. Otherwise a third decides (the median is
  written), and while the readings' spread would raise the entry's threshold past
  1.5 times the configured one (through the recorded noise), two more are taken.
* **Confirming a baseline-mode suspicion** (``remeasure_done``): the suspected
  regression stands only if each fresh-process reading, judged on its own against
  the baseline, is a regression too; the first that is not ends the plan.
  Two independent false alarms in a row are far rarer than one.
* **Confirming a compare-ref suspicion** (``pairs_done``): fresh process pairs;
  their ratios' t interval decides. The first three pairs come together, then one
  pair at a time, with a look after each: the plan stops as soon as the rest
  could not make a regression (``futile``), the readings rule a change of the
  threshold's size out (``cleared``) or already confirm it, both at a stricter
  level (``INTERIM_CONFIDENCE``: looking more than once must not add false
  alarms); at the planned count it stops unless the verdict is still open
  (``undecided``), which earns an extension of half as many pairs again, looked
  at pair by pair the same way.

docs/statistics.md gives the reasoning and the numbers behind each rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

from pytest_gpuperf import stats

T = TypeVar("T")

MIN_CONFIRMING_PAIRS = 3  # fewer independent pair ratios give no usable interval
INTERIM_CONFIDENCE = 0.99  # an early stop on a confirmed regression needs this; the final look uses 95%
NOISY_WRITE_FACTOR = 1.5  # a baseline whose readings raise its threshold past this many times takes more
WRITE_WAVES = (2, 3, 5)  # readings of a baseline write: a check, a decider, two more for a noisy one


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


# -- confirming a compare-ref suspicion ------------------------------------------------------

def pair_waves(planned: int) -> tuple[int, ...]:
    """The looks of a confirmation: after the first pairs together, then after each further pair.

    The first ``MIN_CONFIRMING_PAIRS`` start and measure before the first look (no
    interval exists before), then every pair is looked at up to the planned count
    and through one extension of half as many again (at least one). A pair is only
    started when the look before it left the verdict open (confirm.py).
    """
    first = min(planned, MIN_CONFIRMING_PAIRS)
    return (first, *range(first + 1, last_pair(planned) + 1))


def last_pair(planned: int) -> int:
    """The most pairs a confirmation measures: the planned ones and an extension of half as many again."""
    return planned + max(1, planned // 2)


def pairs_done(ratios: Sequence[float], planned: int, *, pairs: int, threshold: float, confidence: float) -> bool:
    """The stopping rule for compare-ref confirmation pairs, after ``planned`` pairs (see the module docstring)."""
    if len(ratios) < MIN_CONFIRMING_PAIRS:
        return True  # too few pairs could measure: more of the same workers will not help
    last = last_pair(pairs)
    if planned >= last:
        return True  # the extension's last pair
    if confirmed(ratios, threshold, INTERIM_CONFIDENCE) or cleared(ratios, threshold, INTERIM_CONFIDENCE):
        return True
    if planned == pairs:
        return not undecided(ratios, threshold, confidence)
    return futile(ratios, threshold, pairs if planned < pairs else last)


def confirmed(ratios: Sequence[float], threshold: float, confidence: float) -> bool:
    ratio, low, _, _ = stats.replicate_ratio_ci(ratios, confidence)
    return ratio - 1.0 > threshold and low > 1.0


def futile(ratios: Sequence[float], threshold: float, planned: int) -> bool:
    """True when the pairs still to come could only confirm a regression by reading far above these.

    The verdict over all ``planned`` pairs needs their geometric mean ratio above
    ``1 + threshold``. With ``k`` ratios whose log-mean is ``l``, the other
    ``planned - k`` would need a log-mean of ``(planned * L - k * l) / (planned - k)``
    (``L = log(1 + threshold)``). If that lies a whole threshold or more above ``l``,
    which is when ``l <= L * k / planned``, the rest would have to disagree with the
    first wave by more than the smallest change the gate reports. Stopping can only
    clear a suspicion, never make one.
    """
    k = len(ratios)
    if k == 0 or k >= planned:
        return False
    mean_log = sum(math.log(r) for r in ratios) / k
    return mean_log <= math.log1p(threshold) * k / planned


def cleared(ratios: Sequence[float], threshold: float, confidence: float) -> bool:
    """The interval's upper end lies below ``1 + threshold``: a change of the threshold's size is ruled out.

    Like ``futile``, it can only end a confirmation without a regression, never make one.
    """
    if len(ratios) < MIN_CONFIRMING_PAIRS:
        return False
    _, _, high, _ = stats.replicate_ratio_ci(ratios, confidence)
    return high < 1.0 + threshold


def undecided(ratios: Sequence[float], threshold: float, confidence: float) -> bool:
    """Not a regression, yet the estimate is above half the threshold and the interval reaches above it."""
    if len(ratios) < MIN_CONFIRMING_PAIRS:
        return False
    ratio, low, high, _ = stats.replicate_ratio_ci(ratios, confidence)
    change = ratio - 1.0
    regression = change > threshold and low > 1.0
    return not regression and change > threshold / 2 and high > 1.0 + threshold


# -- confirming a baseline-mode suspicion ----------------------------------------------------

def remeasure_waves(remeasures: int) -> tuple[int, ...]:
    return tuple(range(1, remeasures + 1))


def remeasure_done(still_regressed: Callable[[T], bool]) -> Callable[[list[T], int], bool]:
    """Stop at the first reading that is not a regression."""
    return lambda readings, planned: not readings or not still_regressed(readings[-1])


# -- writing a baseline -------------------------------------------------------------------

def baseline_write_done(threshold: float, noise_multiplier: float) -> Callable[[list[float], int], bool]:
    """The stopping rule over the readings' medians of one baseline write."""

    def done(medians: list[float], planned: int) -> bool:
        if len(medians) < 2:
            return True  # no fresh reading could be taken: keep what there is
        if len(medians) == 2:
            return abs(medians[1] / medians[0] - 1.0) <= threshold / 2
        return not too_noisy(spread_threshold(medians, noise_multiplier), threshold)

    return done


def spread_threshold(medians: Sequence[float], noise_multiplier: float, round_medians: Sequence[float] = ()) -> float:
    """The threshold that the entry's recorded noise alone sets (stats.recorded_noise through stats.noise_floor).

    The one answer to how much a baseline's spread raises its threshold: the
    write plan asks it of the readings' medians, the write note of the kept
    reading's rounds and the medians together, as the store records them.
    """
    return stats.noise_floor(stats.recorded_noise(round_medians, medians), 0.0, noise_multiplier)


def too_noisy(raised: float, threshold: float) -> bool:
    """A threshold raised past ``NOISY_WRITE_FACTOR`` times the configured one: the readings were noisy."""
    return raised > NOISY_WRITE_FACTOR * threshold


def chosen_reading(medians: Sequence[float]) -> int:
    """Which reading a baseline is written from: the first of two that agree, else the median one."""
    if len(medians) <= 2:
        return 0
    return sorted(range(len(medians)), key=medians.__getitem__)[len(medians) // 2]
