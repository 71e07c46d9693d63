"""How each mode turns its readings into Evidence; the rules never see the difference.

* baseline mode: the bootstrap CI of the ratio of medians against the stored samples, and a Mann-Whitney p;
* compare-ref: the median of ratios of adjacent head and base rounds, which a machine changing speed cannot move;
* a confirmation: the spread of fresh processes' (or pairs') ratios, with the offset one process carries.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_gpuperf import stats
from pytest_gpuperf.config import GateSettings
from pytest_gpuperf.model import BaselineEntry, Measurement
from pytest_gpuperf.verdict.case import Evidence


def against_baseline(measurement: Measurement, entry: BaselineEntry, settings: GateSettings) -> Evidence:
    """This run's samples against a stored baseline's."""
    base_value = entry.stats.get(settings.statistic)
    current = measurement.stats.get(settings.statistic)
    base_samples = entry.samples_ns or (base_value,)
    ratio, low, high = stats.ratio_of_medians_ci(measurement.samples_ns, base_samples, settings.confidence)
    p = stats.mann_whitney_p(measurement.samples_ns, base_samples) if len(base_samples) > 1 else None
    return Evidence(
        change=current / base_value - 1.0 if base_value > 0 else float("inf"),
        ratio=ratio, low=low, high=high, p_value=p, method="bootstrap of medians",
        readings=measurement.stats.count, reference_readings=entry.stats.count,
    )  # fmt: skip


def paired_rounds(
    head_rounds: Sequence[float], base_rounds: Sequence[float], settings: GateSettings, label: str
) -> Evidence:
    """Adjacent head and base rounds of one process pair; the change is the paired estimate."""
    ratio, low, high, p = stats.paired_median_ratio(head_rounds, base_rounds, settings.confidence)
    n = min(len(head_rounds), len(base_rounds))
    return Evidence(
        change=ratio - 1.0, ratio=ratio, low=low, high=high, p_value=p,
        method=f"median of {n} round-pair ratios vs {label}", readings=n, reference_readings=n, paired=True,
    )  # fmt: skip


def replicates(ratios: Sequence[float], settings: GateSettings, method: str, errors: Sequence[float] = ()) -> Evidence:
    """Independent readings' ratios (fresh processes or process pairs), t interval on their logs.

    ``errors``: each reading's own standard error; where the readings agree more closely than that,
    their spread is taken at it (``stats.replicate_spread``) and the method says so.
    """
    ratio, low, high, p = stats.replicate_ratio_ci(ratios, settings.confidence, errors)
    spread, floored = stats.replicate_spread(ratios, errors)
    if floored:
        method += (
            f"; they agreed more closely than each was measured, so their spread is taken as "
            f"their own error, {spread:.2%}"
        )
    return Evidence(
        change=ratio - 1.0, ratio=ratio, low=low, high=high, p_value=p, method=method,
        readings=len(ratios), reference_readings=len(ratios), paired=True,
    )  # fmt: skip
