"""A minimal stand-in for the ``gpu_bench`` fixture (:class:`~pytest_gpuperf.paths.Bench`), for scripts.

A fixed number of timed calls: no adaptive stopping, no baseline, no gate.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from pytest_gpuperf.model import DEFAULT_MEASUREMENT, Direction, Measurement, Metric, Throughput, metric_problems
from pytest_gpuperf.paths._torch import elapsed_ns


class StandaloneBench:
    """Times each call ``calls`` times after ``warmup`` calls; one sample per call."""

    enabled = True
    smoke = False

    def __init__(
        self, device: torch.device | str = "cpu", *, calls: int = 5, warmup: int = 1, test_id: str = "standalone"
    ) -> None:
        if calls < 1 or warmup < 0:
            raise ValueError(f"calls must be >= 1 and warmup >= 0, got calls={calls}, warmup={warmup}")
        self.device = torch.device(device)
        self.calls = calls
        self.warmup = warmup
        self.test_id = test_id
        self._measurements: dict[str, Measurement] = {}

    @property
    def measurements(self) -> dict[str, Measurement]:
        """Measurements by name, in the order they were taken, metrics attached."""
        return dict(self._measurements)

    def measure(
        self,
        fn: Callable[..., object],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        items: float | None = None,
        flops: float | None = None,
        bytes: float | None = None,
        l2_flush: bool | None = None,
        cuda_graph: bool | None = None,
        energy: bool | None = None,
    ) -> Measurement:
        label = name or DEFAULT_MEASUREMENT
        if label in self._measurements:
            raise ValueError(f"measurement {label!r} measured twice; give each its own name=")
        kw = dict(kwargs or {})
        started = time.perf_counter()
        for _ in range(self.warmup):
            fn(*args, **kw)
        samples = [elapsed_ns(lambda: fn(*args, **kw), self.device) for _ in range(self.calls)]
        peak = None
        if self.device.type == "cuda":
            peak = int(torch.cuda.max_memory_allocated(self.device))
        m = Measurement(
            test_id=self.test_id,
            name=label,
            samples_ns=tuple(samples),
            calls_per_sample=1,
            device=str(self.device),
            timer="perf_counter",
            peak_allocated_bytes=peak,
            throughput=Throughput(items=items, flops=flops, bytes=bytes),
            warmup_calls=self.warmup,
            total_calls=self.warmup + self.calls,
            wall_time_s=time.perf_counter() - started,
        )
        self._measurements[m.name] = m
        return m

    def metric(
        self,
        name: str,
        value: float,
        *,
        unit: str = "",
        better: Direction = "higher",
        tolerance: float | None = 0.10,
        absolute_tolerance: float | None = None,
        minimum: float | None = None,
        maximum: float | None = None,
        measurement: str | None = None,
        description: str = "",
    ) -> Metric:
        if not self._measurements:
            raise ValueError(f"metric {name!r}: no measurement taken yet to attach it to")
        target = measurement if measurement is not None else next(reversed(self._measurements))
        if target not in self._measurements:
            raise KeyError(f"metric {name!r}: no measurement named {target!r}")
        number = value if isinstance(value, (str, bytes, bool)) else float(value)
        new = Metric(name, number, unit, better, tolerance, absolute_tolerance, minimum, maximum, description)
        if problems := metric_problems(new):
            raise ValueError(f"metric {name!r}: {'; '.join(problems)}")
        m = self._measurements[target]
        kept = tuple(x for x in m.metrics if x.name != name)
        self._measurements[target] = dataclasses.replace(m, metrics=(*kept, new))
        return new

    def record(self, measurement: Measurement, *, remeasure: Callable[[], Measurement] | None = None) -> Measurement:
        del remeasure  # a fixed-count stand-in has no gate to confirm anything
        if measurement.name in self._measurements:
            raise ValueError(f"measurement {measurement.name!r} recorded twice")
        m = dataclasses.replace(measurement, test_id=self.test_id)
        self._measurements[m.name] = m
        return m
