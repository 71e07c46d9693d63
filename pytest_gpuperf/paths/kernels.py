"""Custom kernels: achieved TFLOP/s and GB/s, and how close they come to the device's roof.

``fraction_of_peak`` is the roofline one, ``max(flop fraction, bandwidth fraction)``,
gated through ``min_fraction`` (and ``tolerance=``); ``tflops`` and ``gbps`` invert the
already gated time, so they are informational.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pytest_gpuperf.model import Measurement
from pytest_gpuperf.paths import Bench
from pytest_gpuperf.paths.peaks import DevicePeaks, device_peaks, dtype_key


@dataclass(frozen=True)
class KernelReport:
    """Achieved rates of one measurement against ``peaks``."""

    measurement: Measurement
    peaks: DevicePeaks
    tflops: float | None
    gbps: float | None
    flops_fraction: float | None
    bandwidth_fraction: float | None
    fraction_of_peak: float
    bound: str  # "compute" or "memory": the resource closer to its peak


def achieved_rates(seconds: float, flops: float | None, nbytes: float | None) -> tuple[float | None, float | None]:
    """(TFLOP/s, GB/s) of one call taking ``seconds``; None where the work is not given."""
    if seconds <= 0:
        raise ValueError(f"a call's time must be positive, got {seconds} s")
    tflops = flops / seconds / 1e12 if flops is not None else None
    gbps = nbytes / seconds / 1e9 if nbytes is not None else None
    return tflops, gbps


def kernel_efficiency(
    bench: Bench,
    measurement: Measurement,
    *,
    flops: float | None = None,
    bytes: float | None = None,
    dtype: torch.dtype | str = torch.float32,
    peaks: DevicePeaks | None = None,
    min_fraction: float | None = None,
    tolerance: float | None = None,
) -> KernelReport:
    """Attach ``tflops``, ``gbps`` and ``fraction_of_peak`` metrics to ``measurement``."""
    if flops is None and bytes is None:
        raise ValueError(f"{measurement.name}: give flops and/or bytes of one call to rate the kernel")
    if peaks is None:
        peaks = device_peaks(bench.device, dtype)
    seconds = measurement.stats.median_ns / 1e9
    tflops, gbps = achieved_rates(seconds, flops, bytes)
    flops_fraction = tflops / peaks.peak_tflops(dtype) if tflops is not None else None
    bandwidth_fraction = gbps / peaks.memory_gbps if gbps is not None else None
    fractions = {k: v for k, v in (("compute", flops_fraction), ("memory", bandwidth_fraction)) if v is not None}
    bound = max(fractions, key=fractions.__getitem__)
    fraction = fractions[bound]
    for metric, rate, unit, per_call in (
        ("tflops", tflops, "TFLOP/s", f"achieved {dtype_key(dtype)} TFLOP/s ({flops or 0:.4g} FLOP per call)"),
        ("gbps", gbps, "GB/s", f"achieved memory GB/s ({bytes or 0:.4g} bytes per call)"),
    ):
        if rate is not None:  # reported, not gated: fraction_of_peak is the gate
            bench.metric(
                metric, rate, unit=unit, better="higher", tolerance=None, measurement=measurement.name,
                description=per_call,
            )  # fmt: skip
    bench.metric(
        "fraction_of_peak",
        fraction,
        better="higher",
        tolerance=tolerance,
        minimum=min_fraction,
        measurement=measurement.name,
        description=f"{bound}-bound fraction of peak on {peaks.name}, {peaks.source}",
    )
    return KernelReport(measurement, peaks, tflops, gbps, flops_fraction, bandwidth_fraction, fraction, bound)


def measure_kernel(
    bench: Bench,
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    name: str,
    flops: float | None = None,
    bytes: float | None = None,
    dtype: torch.dtype | str = torch.float32,
    peaks: DevicePeaks | None = None,
    min_fraction: float | None = None,
    tolerance: float | None = None,
    l2_flush: bool | None = None,
) -> KernelReport:
    """Measure ``fn(*args, **kwargs)`` as ``name`` and rate it with :func:`kernel_efficiency`."""
    m = bench.measure(fn, args, kwargs, name=name, flops=flops, bytes=bytes, l2_flush=l2_flush)
    return kernel_efficiency(
        bench, m, flops=flops, bytes=bytes, dtype=dtype, peaks=peaks, min_fraction=min_fraction, tolerance=tolerance
    )
