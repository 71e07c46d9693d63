"""How each mode turns its readings into Evidence; the rules never see the difference.

* baseline mode: the bootstrap CI of the ratio of medians against the stored samples, and a Mann-Whitney p;
* compare-ref: the median of ratios of adjacent head and base rounds, which a machine changing speed cannot move;
* a confirmation: the spread of fresh processes' (or pairs') ratios, with the offset one process carries.

Where either side waited for a CPU (model/scheduling.py), the evidence is taken on the times with
that wait taken out, its interval widened by the correction's own uncertainty, and carries the wall
clock's evidence beside it (``Evidence.wall``): users read the wall clock, the verdict the corrected time.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from pytest_gpuperf import stats
from pytest_gpuperf.config import GateSettings
from pytest_gpuperf.model import BaselineEntry, Corrected, CorrectedChange, Measurement, SampleStats
from pytest_gpuperf.stats import format_level
from pytest_gpuperf.verdict import pairs
from pytest_gpuperf.verdict.case import Evidence

# An uncertainty this large (relative, one side) leaves no usable interval: the bracket spans most of the value.
_MAX_UNCERTAINTY = 0.9


def against_baseline(measurement: Measurement, entry: BaselineEntry, settings: GateSettings) -> Evidence:
    """This run's samples against a stored baseline's: on corrected times where either side waited for a CPU."""
    wall = _bootstrap(measurement.samples_ns, measurement.stats, entry.samples_ns, entry.stats, settings)
    now, base = measurement.corrected, entry.corrected
    if not (now.contended or base.contended):
        return wall
    judged = _bootstrap(now.samples_ns, SampleStats.from_samples(now.samples_ns), base.samples_ns,
                        SampleStats.from_samples(base.samples_ns), settings)  # fmt: skip
    return with_correction(judged, wall, now, base)


def _bootstrap(
    samples: Sequence[float], current: SampleStats, base_samples: Sequence[float], base: SampleStats,
    settings: GateSettings,
) -> Evidence:  # fmt: skip
    base_value = base.get(settings.statistic)
    reference = base_samples or (base_value,)
    ratio, low, high = stats.ratio_of_medians_ci(samples, reference, settings.confidence)
    p = stats.mann_whitney_p(samples, reference) if len(reference) > 1 else None
    value = current.get(settings.statistic)
    return Evidence(
        change=value / base_value - 1.0 if base_value > 0 else float("inf"),
        ratio=ratio, low=low, high=high, p_value=p, method="bootstrap of medians",
        readings=current.count, reference_readings=base.count,
    )  # fmt: skip


def with_correction(judged: Evidence, wall: Evidence, now: Corrected, base: Corrected) -> Evidence:
    """``judged`` (on corrected times) as the deciding evidence: its interval widened by both sides'
    correction uncertainty, the wall clock's ``wall`` beside it, and what the correction took out."""
    u_now, u_base = (min(c.uncertainty, _MAX_UNCERTAINTY) for c in (now, base))
    low = judged.low * (1.0 - u_now) / (1.0 + u_base) if math.isfinite(judged.low) else judged.low
    high = judged.high * (1.0 + u_now) / (1.0 - u_base) if math.isfinite(judged.high) else judged.high
    known = now.source or base.source
    source = known.value if known is not None else ""
    correction = CorrectedChange(
        change=judged.change, ci_low=low, ci_high=high, wait_share=now.wait_share,
        reference_wait_share=base.wait_share, uncertainty=u_now + u_base, source=source,
    )  # fmt: skip
    method = f"{judged.method} of times less their run-queue wait"
    return dataclasses.replace(judged, low=low, high=high, method=method, wall=wall, correction=correction)


def paired_rounds(
    head_rounds: Sequence[float], base_rounds: Sequence[float], settings: GateSettings, label: str
) -> Evidence:
    """Adjacent head and base rounds of one process pair; the change is the paired estimate.

    The engine passes the rounds' corrected medians and, where a side waited, puts the wall
    clock's own paired evidence beside it (``with_correction``)."""
    ratio, low, high, p = stats.paired_median_ratio(head_rounds, base_rounds, settings.confidence)
    n = min(len(head_rounds), len(base_rounds))
    return Evidence(
        change=ratio - 1.0, ratio=ratio, low=low, high=high, p_value=p,
        method=f"median of {n} round-pair ratios vs {label}", readings=n, reference_readings=n, paired=True,
    )  # fmt: skip


def confirmation_pairs(
    ratios: Sequence[float], settings: GateSettings, method: str, errors: Sequence[float] = (), *,
    improvement: bool = False,
) -> Evidence:  # fmt: skip
    """Fresh process pairs' ratios as the sequential test's last look saw them (verdict/pairs.py).

    The interval is the look's: its lower end is the bound the beyond side spends its error on, its upper
    end the within side's (both on the suspected change's side: ``improvement`` turns the ratios). ``errors``:
    each pair's own standard error; where the pairs agree more closely than that, their spread is taken at it
    (``stats.replicate_spread``) and the method says so.
    """
    look = pairs.pairs_look(
        pairs.oriented(ratios, improvement), budget=settings.confirm_pairs,
        threshold=pairs.oriented_threshold(settings.threshold, improvement), confidence=settings.confidence,
        errors=errors, improvement=improvement,
    )  # fmt: skip
    ratio, low, high = (1.0 / look.ratio, 1.0 / look.high, 1.0 / look.low) if improvement else (
        look.ratio, look.low, look.high)  # fmt: skip
    _, _, _, p = stats.replicate_ratio_ci(ratios, settings.confidence, errors)
    spread, floored = stats.replicate_spread(ratios, errors)
    if floored:
        method += (
            f"; they agreed more closely than each was measured, so their spread is taken as "
            f"their own error, {spread:.2%}"
        )
    beyond = format_level(pairs.error_rate(settings.confidence))
    within = format_level(pairs.within_error_rate(settings.confidence, improvement))
    return Evidence(
        change=ratio - 1.0, ratio=ratio, low=low, high=high, p_value=p, method=method,
        readings=len(ratios), reference_readings=len(ratios), paired=True, spread=look.spread,
        interval=f"sequential interval (a change of the threshold beyond it at most {beyond}, within {within})",
    )  # fmt: skip
