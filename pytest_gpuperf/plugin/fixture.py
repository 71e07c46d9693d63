"""The ``gpu_bench`` fixture object: what a perf test calls."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.config import Settings, with_call_options, with_fixed_rounds
from pytest_gpuperf.errors import ConfigError, GpuperfError
from pytest_gpuperf.measure.runner import LazyResults, MeasureSpec
from pytest_gpuperf.model import (
    DEFAULT_MEASUREMENT,
    BenchmarkInfo,
    Direction,
    Measurement,
    Metric,
    Note,
    Throughput,
    metric_problems,
    not_finite,
)
from pytest_gpuperf.plugin.outcome import fail, fail_on

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.engines.protocol import Engine


class GpuBench:
    """Measures callables for one test and keeps what it measured.

    ``gpu_bench(fn, *args, **kwargs)`` is the short form; ``measure`` the keyword form with a name and
    throughput units; ``metric`` attaches a gateable number (a speedup, a graph-break count) to a measurement.
    """

    def __init__(
        self, test_id: str, settings: Settings, engine: Engine, device: torch.device,
        guard: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
        remember: Callable[[str, Callable[[], Measurement]], None] | None = None,
    ) -> None:  # fmt: skip
        self.test_id = test_id
        self.settings = settings  # resolved once for this test (config.resolve)
        self._engine = engine
        self._device = device
        self._guard = guard  # serializes measurements across xdist workers sharing a device
        self._remember = remember  # how the engine takes a recorded measurement again (None: it does not)
        self._measurements: dict[str, Measurement] = {}
        self._latest: str | None = None

    @property
    def enabled(self) -> bool:
        """True under ``--gpuperf`` (a real measurement), False in smoke mode."""
        return self.settings.enabled

    @property
    def smoke(self) -> bool:
        return not self.settings.enabled

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def measurements(self) -> Sequence[Measurement]:
        return tuple(self._measurements.values())

    def __call__(self, fn: Callable[..., object], *args: Any, **kwargs: Any) -> Measurement:
        return self.measure(fn, args=args, kwargs=kwargs)

    def measure(
        self, fn: Callable[..., object], args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None, *,
        name: str | None = None, items: float | None = None, flops: float | None = None, bytes: float | None = None,
        l2_flush: bool | None = None, cuda_graph: bool | None = None, energy: bool | None = None,
        lazy_results: LazyResults = LazyResults.REFUSE,
    ) -> Measurement:  # fmt: skip
        """Measure ``fn(*args, **kwargs)``; in smoke mode call it once.

        ``items``, ``flops`` and ``bytes`` are the work of one call, for throughput. ``energy``: the device's
        energy per call as the metric ``energy`` (CUDA with NVML), gated like the others.
        ``lazy_results``: what a call returning a generator or other iterator gets (runner.LazyResults).
        """
        __tracebackhide__ = True
        settings = with_call_options(self.settings, l2_flush=l2_flush, cuda_graph=cuda_graph, energy=energy)
        throughput = Throughput(items=items, flops=flops, bytes=bytes)
        if bad := not_finite(throughput):
            fail(f"{self.test_id}: gpu_bench.measure({', '.join(f'{k}={getattr(throughput, k)!r}' for k in bad)}): "
                 "the work of a call must be a finite number")  # fmt: skip
        return self._take(settings, fn, args, kwargs, name, throughput=throughput, lazy_results=lazy_results)

    def measure_rounds(
        self, fn: Callable[[], object], *, name: str, rounds: int, calls_per_sample: int,
        before_block: Callable[[], None] | None = None, lazy_results: LazyResults = LazyResults.REFUSE,
    ) -> Measurement:  # fmt: skip
        """Measure ``fn()`` in exactly ``rounds`` samples of ``calls_per_sample`` calls (``benchmark.pedantic``).

        ``before_block`` runs before each block, outside the timed region (a per-round setup).
        The time limit still stops a measurement that would run past it.
        """
        __tracebackhide__ = True
        settings = with_fixed_rounds(self.settings, rounds)
        return self._take(settings, fn, (), None, name, calls_per_sample=calls_per_sample, before_block=before_block,
                          lazy_results=lazy_results)  # fmt: skip

    def note(self, text: str, *, measurement: str) -> None:
        """Add ``text`` to the notes of this test's measurement ``measurement`` (shown with the results)."""
        notes = self._measurements[measurement].notes
        if Note(text) not in notes:
            self._replace(measurement, notes=(*notes, Note(text)))

    def describe(self, benchmark: BenchmarkInfo, *, measurement: str) -> None:
        """Attach what the ``benchmark`` fixture knows of this test to ``measurement`` (for ``--benchmark-json``)."""
        self._replace(measurement, benchmark=benchmark)

    def _replace(self, measurement: str, **changes: Any) -> None:
        self._measurements[measurement] = dataclasses.replace(self._measurements[measurement], **changes)

    def _take(
        self, settings: Settings, fn: Callable[..., object], args: Sequence[Any], kwargs: Mapping[str, Any] | None,
        name: str | None, **spec_fields: Any,
    ) -> Measurement:  # fmt: skip
        """Measure ``fn(*args, **kwargs)`` with ``settings`` under the device guard; store the result."""
        __tracebackhide__ = True
        try:
            if not callable(fn):
                raise ConfigError(f"gpu_bench needs a callable, got {type(fn).__name__}", test_id=self.test_id)
            spec = MeasureSpec(fn=fn, args=tuple(args), kwargs=dict(kwargs or {}), test_id=self.test_id,
                               name=self._new_name(name), settings=settings.measure, **spec_fields)  # fmt: skip
            with self._guard():
                measurement = self._engine.measure(spec, settings)
        except GpuperfError as exc:  # it says what is wrong and where; the plugin's stack adds nothing
            fail_on(exc)
        except Exception as exc:
            _explain_oom(exc, self._device)
            raise
        self._store(measurement)
        return measurement

    def metric(
        self, name: str, value: float, *, unit: str = "", better: Direction = "higher",
        tolerance: float | None = 0.10, absolute_tolerance: float | None = None, minimum: float | None = None,
        maximum: float | None = None, measurement: str | None = None, description: str = "",
    ) -> Metric:  # fmt: skip
        """Attach a gateable metric to a measurement of this test (default: the latest one)."""
        __tracebackhide__ = True
        target = measurement or self._latest
        if target is None or target not in self._measurements:
            known = ", ".join(self._measurements) or "none yet"
            fail(f"{self.test_id}: gpu_bench.metric({name!r}) needs a measurement to attach to "
                 f"(asked for {target!r}; measured: {known})")  # fmt: skip
        if better not in ("higher", "lower"):
            fail(f"{self.test_id}: gpu_bench.metric(better=...) must be 'higher' or 'lower', got {better!r}")
        new = Metric(name=name, value=_number(value), unit=unit, better=better, tolerance=tolerance,
                     absolute_tolerance=absolute_tolerance, minimum=minimum, maximum=maximum,
                     description=description)  # fmt: skip
        self._check_metric(new, target)
        kept = tuple(m for m in self._measurements[target].metrics if m.name != name)
        self._replace(target, metrics=(*kept, new))
        return new

    def record(self, measurement: Measurement, *, remeasure: Callable[[], Measurement] | None = None) -> Measurement:
        """Add a measurement taken elsewhere (DDP ranks, a worker); the gate may ``remeasure`` it to confirm."""
        __tracebackhide__ = True
        try:
            self._new_name(measurement.name)
        except GpuperfError as exc:
            fail(str(exc))
        own = dataclasses.replace(measurement, test_id=self.test_id)
        for m in own.metrics:
            self._check_metric(m, own.name)
        if remeasure is not None and self._remember is not None:
            test_id = self.test_id

            def again() -> Measurement:  # runs inside the gate, already under the device guard
                return dataclasses.replace(remeasure(), test_id=test_id)

            self._remember(own.key, again)
        self._store(own)
        return own

    def _check_metric(self, metric: Metric, measurement: str | None) -> None:
        """Fail the test on a metric a verdict or a store cannot use, naming each argument (model.metric_problems)."""
        __tracebackhide__ = True
        if problems := metric_problems(metric):
            fail(f"{self.test_id}: metric {metric.name!r} of measurement {measurement!r}: {'; '.join(problems)}")

    def _new_name(self, name: str | None) -> str:
        label = name if name is not None else DEFAULT_MEASUREMENT
        if not isinstance(label, str) or not label or "::" in label:
            raise ConfigError(
                f"measurement name must be a non-empty string without '::', got {label!r}", test_id=self.test_id
            )
        if label in self._measurements:
            hint = "; give each measurement its own name=" if name is None else ""
            raise ConfigError(f"measurement {label!r} measured twice in one test{hint}", test_id=self.test_id)
        return label

    def _store(self, measurement: Measurement) -> None:
        self._measurements[measurement.name] = measurement
        self._latest = measurement.name


def _explain_oom(exc: BaseException, device: torch.device) -> None:
    """After an out-of-memory error: free the cache for later tests and attach the allocator's view."""
    from pytest_gpuperf.gpu.memory import MemoryTracker, is_oom_error

    if not is_oom_error(exc):
        return
    tracker = MemoryTracker(device)
    report = tracker.oom_report()
    tracker.release()
    if hasattr(exc, "add_note"):  # Python >= 3.11; older versions keep the bare error
        exc.add_note(f"pytest-gpuperf: out of memory while measuring on {device}\n{report}")


def _number(value: Any) -> Any:
    """A metric's value as a float where it is a number (a 0-d tensor, numpy's), else as given: refused by name."""
    if isinstance(value, (str, bytes, bool)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return value
