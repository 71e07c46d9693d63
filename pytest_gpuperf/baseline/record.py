"""Turn a Measurement into a BaselineEntry: the one way, for the store, compare-ref's base and ``gpuperf compare``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pytest_gpuperf import stats
from pytest_gpuperf.model import BaselineEntry, Environment, Measurement, Provenance, RecordedCorrection

DEFAULT_MAX_SAMPLES = 100
# The most between-run noise an entry records: a spread of log medians beyond e-fold (2.7x) would let the
# noise floor pass anything (baseline/plausible.py refuses more). A measurement noisier than that is recorded
# at the cap: its threshold is capped anyway (verdict/rules.py), and the entry says it cannot gate.
MAX_NOISE = 1.0


class _Measured:
    """``noise``'s default: the measurement's own between-run noise (``measured_noise``)."""


MEASURED: Final = _Measured()


def measured_noise(m: Measurement) -> float | None:
    """The between-run noise an entry records for ``m``: its rounds' spread, and its fresh processes'
    (``stats.recorded_noise``), both of the times with their run-queue wait taken out (the load's own
    spread is not the code's). The store writes it and ``gpuperf compare`` judges with it."""
    return stats.recorded_noise(m.judged_round_medians_ns, m.process_medians_ns)


def _capped(noise: float | None) -> float | None:
    return None if noise is None else min(noise, MAX_NOISE)


def recorded_correction(m: Measurement, max_samples: int = DEFAULT_MAX_SAMPLES) -> RecordedCorrection | None:
    """What an entry keeps of ``m``'s correction for run-queue wait: nothing where it hardly waited."""
    corrected = m.corrected
    if not corrected.contended or corrected.source is None:
        return None
    return RecordedCorrection(thin_evenly(sorted(corrected.samples_ns), max_samples), corrected.wait_share,
                              corrected.uncertainty, corrected.source)  # fmt: skip


def thin_evenly(values: Sequence[float], limit: int) -> tuple[float, ...]:
    """At most ``limit`` of ``values``, picked at evenly spaced positions (first and last included)."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    n = len(values)
    if n <= limit:
        return tuple(values)
    if limit == 1:
        return (values[(n - 1) // 2],)
    # position i of limit picks: round(i * (n - 1) / (limit - 1)), in integers so no float drift
    return tuple(values[(i * (n - 1) + (limit - 1) // 2) // (limit - 1)] for i in range(limit))


def entry_from_measurement(
    m: Measurement,
    environment: Environment,
    provenance: Provenance,
    *,
    recorded_at: str | None,
    noise: float | _Measured | None = MEASURED,
    max_samples: int = DEFAULT_MAX_SAMPLES,
) -> BaselineEntry:
    """The baseline record of ``m``: statistics of all samples, a bounded subset of the samples.

    ``noise`` defaults to ``measured_noise(m)``. The kept samples are evenly spaced order statistics, so a
    rank test or bootstrap against them sees the full distribution; ``round_medians_ns`` keeps the time order."""
    if not m.samples_ns:
        raise ValueError(f"{m.key}: a measurement without samples cannot become a baseline")
    return BaselineEntry(
        key=m.key,
        stats=m.stats,
        samples_ns=thin_evenly(sorted(m.samples_ns), max_samples),
        calls_per_sample=m.calls_per_sample,
        device=m.device,
        timer=m.timer,
        round_medians_ns=thin_evenly(m.round_medians_ns, max_samples),
        noise=_capped(measured_noise(m) if isinstance(noise, _Measured) else noise),
        reference_ns=dict(m.reference_ns),
        calibration_ns=m.calibration_ns,
        speed_probe_ns=m.speed_probe_ns,
        speed_probe_spread=m.speed_probe_spread,
        written_busy=m.written_busy,
        peak_allocated_bytes=m.peak_allocated_bytes,
        peak_reserved_bytes=m.peak_reserved_bytes,
        throughput=m.throughput,
        metrics=m.metrics,
        environment=environment,
        provenance=provenance,
        recorded_at=recorded_at,
        profile=m.op_profile,
        correction=recorded_correction(m, max_samples),
        device_state=m.device_state.summary if m.device_state is not None else None,
    )
