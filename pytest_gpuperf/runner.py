"""Warm-up, block sizing, measurement rounds and adaptive stopping.

The stopping rule: measure in rounds (a fraction of the time budget each);
after each round compute the relative half-width of the 95% confidence
interval of the median; stop once it is within ``target_precision`` and at
least ``min_time`` has been spent, or when ``max_time`` is spent. Rounds also
give the round-to-round spread of the median, which the baseline records as
its noise, and they are the unit the compare-ref engine alternates.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.errors import MeasurementError
from pytest_gpuperf.model import Measurement, Metric, ProfileSummary, Throughput
from pytest_gpuperf.stats import relative_precision
from pytest_gpuperf.timers import Timer, timer_for

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.host import HostGuard, Interleaved

MIN_SAMPLES = 10  # below this the CI of the median is not worth computing
MIN_ROUNDS = 3  # the noise estimate needs a few round medians
ROUND_FRACTION = 0.1  # a round is this share of max_time (clamped below)
MAX_ROUND_S = 0.25
MAX_SAMPLES = 20_000  # a cap on memory for very fast functions
WARMUP_SETTLE = 0.05  # warm-up ends once consecutive block times agree within 5%


@dataclass
class MeasureSpec:
    """One measurement request: what to call and how."""

    fn: Callable[..., object]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    test_id: str = ""
    name: str = "default"
    throughput: Throughput = field(default_factory=Throughput)
    settings: MeasureSettings = field(default_factory=MeasureSettings)
    calibration: Interleaved | None = None  # the host guard's calibration workload, when on
    metrics: tuple[Metric, ...] = ()


@dataclass(frozen=True)
class RunnerOptions:
    """Session-wide measurement switches."""

    device: torch.device
    guard: HostGuard | None = None  # pinning, health, CPU peak memory (pytest_gpuperf.host); None: the device's
    nvtx: bool = True
    nsight: bool = False
    profile_dir: Path | None = None
    # Queue each CUDA block behind a short GPU sleep (timers.py); off only to study its effect.
    head_start: bool = True


def round_seconds(settings: MeasureSettings) -> float:
    """How long one round of a measurement lasts."""
    s = settings
    return min(MAX_ROUND_S, max(s.max_time_s * ROUND_FRACTION / 2, s.min_time_s / MIN_ROUNDS, 0.001))


def measured_enough(settings: MeasureSettings, rounds: int, samples: Sequence[float], measured_s: float) -> bool:
    """The stopping rule: out of samples or time (max_time), or precise enough after min_time and MIN_ROUNDS."""
    if len(samples) >= MAX_SAMPLES or measured_s >= settings.max_time_s:
        return True
    if rounds < MIN_ROUNDS or measured_s < settings.min_time_s or len(samples) < MIN_SAMPLES:
        return False
    return relative_precision(samples) <= settings.target_precision


class PreparedMeasurement:
    """A warmed-up measurement that can be driven round by round."""

    def __init__(self, runner: Runner, spec: MeasureSpec) -> None:
        from pytest_gpuperf.gpu.l2 import L2Flusher
        from pytest_gpuperf.gpu.memory import MemoryTracker

        self.runner = runner
        self.spec = spec
        self.device = runner.options.device
        self.timer: Timer = timer_for(self.device, head_start=runner.options.head_start)
        self.samples: list[float] = []
        self.round_medians: list[float] = []
        self.notes: list[str] = []
        self.started = time.perf_counter()
        self.measured_s = 0.0
        self.total_calls = 0
        self._call = self._make_call()
        self._flusher = L2Flusher(self.device) if spec.settings.l2_flush else None
        if self._flusher is not None and not self._flusher.active:
            self.notes.append("l2_flush requested but inactive on this device")
        self.memory = MemoryTracker(self.device)
        if self._flusher is not None and self._flusher.active:
            # the flush buffer is the harness's memory, not the measured function's
            self.memory.exclude(self._flusher.nbytes, self._flusher.reserved_bytes)
        self.guard = runner.guard
        self.health = self.guard.health_monitor()
        if self.guard.pin_cpu is not None:
            self.notes.append(f"rounds pinned to CPU {self.guard.pin_cpu}")
        with self.guard.pinned():
            self.warmup_calls, self.per_call_ns = self._warm_up()
        self.calls_per_sample = self._calls_per_sample()
        self.memory.reset()
        if self.health is not None:
            self.health.start()

    def _make_call(self) -> Callable[[], object]:
        spec = self.spec
        fn, args, kwargs = spec.fn, spec.args, dict(spec.kwargs)
        if spec.settings.cuda_graph:
            from pytest_gpuperf.gpu.graphs import capture

            return capture(fn, args, kwargs, self.device)
        return lambda: fn(*args, **kwargs)

    def _warm_up(self) -> tuple[int, float]:
        """Call until block times settle or the warm-up budget is spent; return calls and ns/call."""
        from pytest_gpuperf.profiling.nvtx_ranges import nvtx_range

        budget_ns = self.spec.settings.warmup_time_s * 1e9
        calls = 1
        done = 0
        previous: float | None = None
        spent = 0.0
        with nvtx_range(f"{self.spec.test_id}::{self.spec.name} warmup", enabled=self.runner.options.nvtx):
            while True:
                total = self.timer.time_blocks(self._call, calls, 1)[0]
                self._check(total)
                done += calls
                spent += total
                per_call = total / calls
                settled = previous is not None and abs(per_call - previous) <= WARMUP_SETTLE * previous
                if spent >= budget_ns or (settled and spent >= budget_ns / 4):
                    return done, per_call
                previous = per_call
                # Grow blocks geometrically so short functions reach a timeable block quickly.
                if total < self.timer.min_sample_ns:
                    calls *= 2

    def _calls_per_sample(self) -> int:
        if self._flusher is not None and self._flusher.active:
            return 1  # a cold cache is only cold for the first call after a flush
        return max(1, math.ceil(self.timer.min_sample_ns / max(self.per_call_ns, 1.0)))

    def _check(self, total_ns: float) -> None:
        if not math.isfinite(total_ns) or total_ns < 0:
            raise MeasurementError(self.spec.test_id, f"measurement {self.spec.name!r} produced timing {total_ns}")

    def round(self, budget_s: float) -> list[float]:
        """One round of about ``budget_s`` seconds; returns its per-call samples."""
        from pytest_gpuperf.profiling.nsight import capture_range
        from pytest_gpuperf.profiling.nvtx_ranges import nvtx_range

        block_ns = self.per_call_ns * self.calls_per_sample
        count = max(1, min(MAX_SAMPLES - len(self.samples), int(budget_s * 1e9 / max(block_ns, 1.0))))
        between = self._flusher.flush if self._flusher is not None and self._flusher.active else None
        label = f"{self.spec.test_id}::{self.spec.name}"
        t0 = time.perf_counter()
        with self.guard.pinned(), nvtx_range(label, enabled=self.runner.options.nvtx), capture_range(
            self.runner.options.nsight, self.device
        ) as capture:
            totals = self.timer.time_blocks(
                self._call, self.calls_per_sample, count, between, deadline_ns=time.perf_counter_ns() + budget_s * 2e9
            )
        self.measured_s += time.perf_counter() - t0
        if capture.note:
            self.notes.append(capture.note)
        for total in totals:
            self._check(total)
        per_call = [t / self.calls_per_sample for t in totals]
        self.samples.extend(per_call)
        self.total_calls += len(totals) * self.calls_per_sample
        self.round_medians.append(statistics.median(per_call))
        # Track drift: the next round's size follows what the function costs now.
        self.per_call_ns = self.round_medians[-1]
        if self.spec.calibration is not None:
            with self.guard.pinned():  # the reference workload on the same core
                self.spec.calibration.step()
        return per_call

    def precision(self) -> float:
        if len(self.samples) < MIN_SAMPLES:
            return math.inf
        return relative_precision(self.samples)

    def run_to_completion(self) -> None:
        """Rounds until precise enough (after min_time) or out of time (max_time)."""
        round_s = round_seconds(self.spec.settings)
        while True:
            self.round(round_s)
            if measured_enough(self.spec.settings, len(self.round_medians), self.samples, self.measured_s):
                return

    def finish(self) -> Measurement:
        """Stop health monitoring, read memory peaks, profile if asked, and build the Measurement."""
        if not self.samples:
            raise MeasurementError(self.spec.test_id, f"measurement {self.spec.name!r} took no samples")
        unstable: str | None = None
        health: dict[str, object] = {}
        if self.health is not None:
            report = self.health.stop()
            unstable = report.unstable_reason
            self.notes.extend(report.notes)
            health = dict(report.data)
        precision = self.precision()
        if precision > self.spec.settings.target_precision:
            self.notes.append(
                f"precision {precision:.1%} above target {self.spec.settings.target_precision:.1%} "
                f"at the time budget ({self.spec.settings.max_time_s:g}s)"
            )
        if self._flusher is not None:
            self._flusher.close()
        profile = self._profile()
        calibration = self.spec.calibration.result_ns() if self.spec.calibration is not None else None
        return Measurement(
            test_id=self.spec.test_id,
            name=self.spec.name,
            samples_ns=tuple(self.samples),
            calls_per_sample=self.calls_per_sample,
            device=str(self.device),
            timer=self.timer.name,
            round_medians_ns=tuple(self.round_medians),
            precision=precision if math.isfinite(precision) else None,
            calibration_ns=calibration,
            peak_allocated_bytes=self._peak_allocated(),
            peak_reserved_bytes=self.memory.peak_reserved(),
            throughput=self.spec.throughput,
            metrics=self.spec.metrics,
            warmup_calls=self.warmup_calls,
            total_calls=self.total_calls,
            wall_time_s=time.perf_counter() - self.started,
            unstable_reason=unstable,
            notes=tuple(self.notes),
            health=health,
            profile=profile,
        )

    def _peak_allocated(self) -> int | None:
        """The allocator's peak where it keeps one (CUDA), else what the host guard measures (a CPU's profiler)."""
        peak = self.memory.peak_allocated()
        return peak if peak is not None else self.guard.peak_memory(self._call)

    def _profile(self) -> ProfileSummary | None:
        """A short torch.profiler capture after the timed samples, never during them."""
        out = self.runner.options.profile_dir
        if out is None:
            return None
        from pytest_gpuperf.profiling.torch_profile import profile_calls

        return profile_calls(
            self.spec.fn,
            self.spec.args,
            dict(self.spec.kwargs),
            out_dir=out,
            label=f"{self.spec.test_id}::{self.spec.name}",
            device=self.device,
        )


class Runner:
    """Turns MeasureSpecs into Measurements on one device."""

    def __init__(self, options: RunnerOptions) -> None:
        from pytest_gpuperf.host import guard_for

        self.options = options
        self.guard: HostGuard = options.guard or guard_for(options.device, mode="baseline", pin_cpu="off")

    def prepare(self, spec: MeasureSpec) -> PreparedMeasurement:
        return PreparedMeasurement(self, spec)

    def measure(self, spec: MeasureSpec) -> Measurement:
        prepared = self.prepare(spec)
        prepared.run_to_completion()
        return prepared.finish()

    def smoke(self, spec: MeasureSpec) -> Measurement:
        """One call, synchronized, wall-clock timed: a correctness run of the perf test."""
        timer = timer_for(self.options.device)
        start = time.perf_counter_ns()
        spec.fn(*spec.args, **dict(spec.kwargs))
        timer.synchronize()
        elapsed = float(time.perf_counter_ns() - start)
        return Measurement(
            test_id=spec.test_id,
            name=spec.name,
            samples_ns=(elapsed,),
            calls_per_sample=1,
            device=str(self.options.device),
            timer="perf_counter",
            throughput=spec.throughput,
            metrics=spec.metrics,
            total_calls=1,
            wall_time_s=elapsed / 1e9,
            notes=("smoke run: one call, not a measurement (use --gpuperf)",),
        )

