"""Warm-up, block sizing, measurement rounds and adaptive stopping.

Measure in rounds (a fraction of the time budget each) until the stopping rule
(stopping.py) says enough. Rounds also give the round-to-round spread of the
median, which the baseline records as its noise, and are the unit the
compare-ref engine alternates. The time limit (``time_limit_s``) covers the
warm-up, the rounds and the CPU memory probe; a call still running at the limit
fails the measurement (``MeasurementTimeout``, time_limit.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import inspect
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.errors import MeasurementError, MeasurementTimeout
from pytest_gpuperf.measure.allocator import settle_allocator
from pytest_gpuperf.measure.sched import BlockAccounting
from pytest_gpuperf.measure.stopping import LIMIT_MARGIN, Progress, Stop, StoppingRule
from pytest_gpuperf.measure.time_limit import check_deadline, hard_limit, signals_usable
from pytest_gpuperf.measure.timers import BlockObserver, BlockObservers, Timer, timer_for
from pytest_gpuperf.model import Measurement, Metric, Note, NoteKind, ProfileSummary, Scheduling, Throughput, correct
from pytest_gpuperf.modes import Mode, plan_for
from pytest_gpuperf.stats import relative_precision

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.gpu.device_state import DeviceReport, DeviceSampler
    from pytest_gpuperf.measure.host import HostGuard, Interleaved
    from pytest_gpuperf.profiling.torch_profile import ProfileCapture

PRECISION_MIN_SAMPLES = 10  # the precision stop waits for this many samples
MIN_ROUNDS = 3  # the noise estimate needs a few round medians
ROUND_FRACTION = 0.1  # a round is this share of max_time (clamped below)
MAX_ROUND_S = 0.25
MAX_SAMPLES = 20_000  # a cap on memory for very fast functions
WARMUP_SETTLE = 0.05  # warm-up ends once consecutive block times agree within 5%
WARMUP_LIMIT_SHARE = 0.25  # nor does warm-up take more than this share of the time limit
HOST_TIME_METRIC = "host_time"
# The host's launch time per call moves more between runs than device time (Python, the
# allocator, the OS scheduler): a quarter is the smallest change that reads as a real one.
HOST_TIME_TOLERANCE = 0.25


class LazyResults(enum.Enum):
    """What a measured call that returns a generator, coroutine or other iterator gets."""

    REFUSE = "refuse"  # gpu_bench: an error naming the test; the work would not be in the timing
    # the benchmark fixture: timed as pytest-benchmark times it, with a note, so its suites run unchanged
    TIME_AS_WRITTEN = "time as written"


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
    metrics: tuple[Metric, ...] = ()
    # benchmark.pedantic: a fixed block size (its iterations; None: sized from the warm-up), and
    # its per-round setup, run before each block outside the timed region
    calls_per_sample: int | None = None
    before_block: Callable[[], None] | None = None
    # (grad enabled, inference mode) where the test asked for the measurement, for later passes
    autograd: tuple[bool, bool] | None = field(default_factory=lambda: autograd_mode())
    lazy_results: LazyResults = LazyResults.REFUSE


def autograd_mode() -> tuple[bool, bool] | None:
    """(grad enabled, inference mode) now; None before torch is loaded."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return bool(torch.is_grad_enabled()), bool(torch.is_inference_mode_enabled())


@contextlib.contextmanager
def in_autograd_mode(mode: tuple[bool, bool] | None) -> Iterator[None]:
    """Run the block in ``mode`` (autograd_mode), so a profile after the test body runs what was measured.

    Outside the test's ``inference_mode()`` it would record autograd graphs and compile again.
    """
    if mode is None:
        yield
        return
    import torch

    grad, inference = mode
    with torch.inference_mode(inference), torch.set_grad_enabled(grad):
        yield


@dataclass(frozen=True)
class RunnerOptions:
    """Session-wide measurement switches."""

    device: torch.device
    guard: HostGuard | None = None  # pinning, health, CPU peak memory (pytest_gpuperf.measure.host); None: the device's
    nvtx: bool = True
    nsight: bool = False
    profile_dir: Path | None = None
    # Queue each CUDA block behind a short GPU sleep (timers.py); off only to study its effect.
    head_start: bool = True
    # time the host guard's reference work after each round (host/cpu/reference.py; ModePlan.takes_reference)
    reference: bool = False


def round_seconds(settings: MeasureSettings) -> float:
    """How long one round of a measurement lasts."""
    return min(MAX_ROUND_S, max(settings.max_time_s * ROUND_FRACTION / 2, settings.min_time_s / MIN_ROUNDS, 0.001))


def stopping_rule(settings: MeasureSettings, check_samples: int | None = None) -> StoppingRule:
    """The rule of a measurement's own rounds; fixed ``settings.rounds`` stop at exactly that many samples.

    ``check_samples``: a check of a long call's median stops there (StoppingRule.check_samples).
    """
    rule = StoppingRule.from_settings(
        settings,
        round_s=round_seconds(settings),
        min_rounds=MIN_ROUNDS,
        precision_samples=PRECISION_MIN_SAMPLES,
        max_samples=MAX_SAMPLES,
    )
    if settings.rounds is None:
        return dataclasses.replace(rule, check_samples=check_samples)
    return dataclasses.replace(rule, min_samples=settings.rounds, max_samples=settings.rounds)


def sample_precision(samples: Sequence[float]) -> float:
    """The relative half-width of the 95% CI of the median; inf while it does not exist."""
    return relative_precision(samples) if samples else math.inf


_NEVER_RUNS = "its body never runs when called"
_NOT_CONSUMED = "its work runs only as it is iterated, and nothing iterates it"
# What a measured call may not return, as the work would not be in the timing: generators and
# coroutines first (their own wording), then any other iterator (map, zip, iter(loader) ...).
_LAZY_RESULTS: tuple[tuple[Callable[[object], bool], str, str, str], ...] = (
    (inspect.isasyncgen, "an async generator", _NEVER_RUNS, "lambda: asyncio.run(consume(agen()))"),
    (inspect.iscoroutine, "a coroutine", _NEVER_RUNS, "lambda: asyncio.run(coro())"),
    (inspect.isgenerator, "a generator", _NEVER_RUNS, "lambda: list(gen())"),
    (inspect.isawaitable, "an awaitable", _NEVER_RUNS, "lambda: asyncio.run(coro())"),
    (lambda r: isinstance(r, Iterator), "an iterator", _NOT_CONSUMED, "lambda: list(map(f, xs))"),
)


def check_lazy_result(result: object, spec: MeasureSpec) -> str | None:
    """The note on a lazy result (generator, coroutine, awaitable, iterator), whose work the timing misses.

    Under ``LazyResults.REFUSE`` it is a MeasurementError instead. A coroutine or
    generator is closed first: Python warns about a coroutine never awaited.
    """
    for test, kind, why, example in _LAZY_RESULTS:
        if test(result):
            if inspect.iscoroutine(result) or inspect.isgenerator(result):
                result.close()
            what = kind if kind != "an iterator" else f"an iterator ({type(result).__name__})"
            if spec.lazy_results is LazyResults.TIME_AS_WRITTEN:
                return (
                    f"the measured call returns {what}: as with pytest-benchmark, only the call that creates it "
                    f"is timed, not the work it holds (to time the work: {example})"
                )
            raise MeasurementError(
                spec.test_id,
                f"measurement {spec.name!r} returned {what}: {why}; measure a function that does the work "
                f"(e.g. {example})",
            )
    return None


def _checked(fn: Callable[..., object], spec: MeasureSpec, notes: list[Note]) -> Callable[..., object]:
    """``fn`` with its results checked by ``check_lazy_result``: for the first calls only, never the timed ones."""

    def call(*args: Any, **kwargs: Any) -> object:
        result = fn(*args, **kwargs)
        said = check_lazy_result(result, spec)
        if said is not None and Note(said) not in notes:
            notes.append(Note(said))
        return result

    return call


class PreparedMeasurement:
    """A warmed-up measurement that can be driven round by round."""

    def __init__(self, runner: Runner, spec: MeasureSpec) -> None:
        from pytest_gpuperf.gpu.l2 import L2Flusher
        from pytest_gpuperf.gpu.memory import MemoryTracker

        self.runner = runner
        self.spec = spec
        self.device = runner.options.device
        self.rule = stopping_rule(spec.settings)
        self.started = time.perf_counter()
        self.deadline = self.started + spec.settings.time_limit_s  # time.perf_counter seconds
        self.stop: Stop | None = None  # why run_to_completion stopped
        self.timer: Timer = timer_for(self.device, head_start=runner.options.head_start)
        self.samples: list[float] = []
        self.host_samples: list[float] = []  # the host's time per call of each block, where the timer has one
        self.round_medians: list[float] = []
        # the scheduler's accounting around every block (sched.py), and each round's samples with their
        # run-queue wait taken out: what compare-ref alternates on and a verdict reads (model/scheduling.py)
        self.accounting = BlockAccounting()
        self.corrected_round_medians: list[float] = []
        self.last_corrected: list[float] = []
        self.notes: list[Note] = []
        self.measured_s = 0.0
        self.total_calls = 0
        self._call = self._make_call()
        self._flusher = L2Flusher(self.device) if spec.settings.l2_flush else None
        if self._flusher is not None and not self._flusher.active:
            self.notes.append(Note("l2_flush requested but inactive on this device"))
        self.memory = MemoryTracker(self.device)
        if self._flusher is not None and self._flusher.active:
            # the flush buffer is the harness's memory, not the measured function's
            self.memory.exclude(self._flusher.nbytes, self._flusher.reserved_bytes)
        from pytest_gpuperf.measure.host import device_sampler

        self.guard = runner.guard
        self.health = self.guard.health_monitor()
        self.sampler: DeviceSampler | None = device_sampler(
            self.guard
        )  # the device's clocks, power and energy beside every sample
        if spec.settings.energy and self.sampler is None:
            self.notes.append(Note(f"energy requested but not measured: NVML reads a CUDA device's energy, "
                                   f"not {self.device.type}'s"))  # fmt: skip
        self.reference: Interleaved | None = self.guard.reference() if runner.options.reference else None
        if self.guard.pin_cpu is not None:
            self.notes.append(Note(f"rounds pinned to CPU {self.guard.pin_cpu}", NoteKind.ROUTINE))
        self.fastest_call_ns = math.inf  # the warm-up's fastest block, per call: what sizes the blocks
        with self.guard.pinned():
            self.warmup_calls, self.per_call_ns = self._warm_up()
        self.calls_per_sample = self._calls_per_sample()
        self.memory.reset()
        if self.health is not None:
            self.health.start()
        if self.sampler is not None:
            self.sampler.start()

    def elapsed_s(self) -> float:
        """Seconds since this measurement began (its warm-up included): what the time limit bounds."""
        return time.perf_counter() - self.started

    def _limited(self, phase: str) -> contextlib.AbstractContextManager[None]:
        """The hard stop at the time limit around the calls of ``phase``."""
        return hard_limit(self.deadline, lambda: self._timeout(phase))

    def _timeout(self, phase: str) -> MeasurementTimeout:
        limit = self.spec.settings.time_limit_s
        return MeasurementTimeout(
            self.spec.test_id,
            f"measurement {self.spec.name!r} ran past its {limit:g} s time limit during the {phase}: "
            "a call did not return in time (is it stuck?). A longer limit: --gpuperf-time-limit=SECONDS "
            "or @pytest.mark.gpuperf(time_limit=SECONDS)",
        )

    def _make_call(self) -> Callable[[], object]:
        spec = self.spec
        fn, args, kwargs = spec.fn, spec.args, dict(spec.kwargs)
        if spec.settings.cuda_graph:
            from pytest_gpuperf.gpu.graphs import capture

            with self._limited("CUDA graph capture"):  # capture calls the function a few times
                return capture(_checked(fn, spec, self.notes), args, kwargs, self.device)
        return lambda: fn(*args, **kwargs)

    def _first_call(self) -> Callable[[], object]:
        """The warm-up's first call, which also rejects a generator or coroutine for a result."""
        if self.spec.settings.cuda_graph:
            return self._call  # the capture checked the function's own calls; a replay returns tensors
        return _checked(self._call, self.spec, self.notes)

    def _warm_up(self) -> tuple[int, float]:
        """Call until block times settle or the warm-up budget is spent; return calls and ns/call.

        One call that alone exceeds the budget ends the warm-up.
        """
        from pytest_gpuperf.profiling.nvtx_ranges import nvtx_range

        settings = self.spec.settings
        budget_ns = min(settings.warmup_time_s, settings.time_limit_s * WARMUP_LIMIT_SHARE) * 1e9
        calls = self.spec.calls_per_sample or 1
        done = 0
        previous: float | None = None
        spent = 0.0
        call = self._first_call()
        label = f"{self.spec.test_id}::{self.spec.name} warmup"
        with nvtx_range(label, enabled=self.runner.options.nvtx), self._limited("warm-up"):
            while True:
                total = self.timer.time_blocks(call, calls, 1, self.spec.before_block)[0]
                call = self._call
                self._check(total)
                check_deadline(self.deadline, lambda: self._timeout("warm-up"))  # where no signal stops a call
                done += calls
                spent += total
                per_call = total / calls
                self.fastest_call_ns = min(self.fastest_call_ns, per_call)
                settled = previous is not None and abs(per_call - previous) <= WARMUP_SETTLE * previous
                if spent >= budget_ns or (settled and spent >= budget_ns / 4):
                    return done, per_call
                previous = per_call
                # Grow blocks geometrically so short functions reach a timeable block quickly.
                if total < self.timer.min_sample_ns and self.spec.before_block is None:
                    calls *= 2

    def _calls_per_sample(self) -> int:
        """Calls per timed block: enough for the timer (``min_sample_ns``), in whole pedantic iterations.

        A sub-microsecond call timed alone is mostly the clock's own cost, which moves with the
        process; a block of them is the call's time. A per-round setup keeps blocks of exactly
        ``benchmark.pedantic``'s ``iterations``. Sized from the warm-up's fastest block: a block that
        waited for a CPU would size them too short.
        """
        fixed = self.spec.calls_per_sample
        if fixed is not None and self.spec.before_block is not None:
            return fixed
        if self._flusher is not None and self._flusher.active:
            return fixed or 1  # a cold cache is only cold for the first call after a flush
        unit = fixed or 1
        per_call = min(self.per_call_ns, self.fastest_call_ns)
        blocks = max(1, math.ceil(self.timer.min_sample_ns / max(per_call * unit, 1.0)))
        if fixed is not None and blocks > 1:
            self.notes.append(Note(
                f"timed in blocks of {blocks * unit} calls ({blocks} x {unit} iterations): one block of "
                f"{unit} lasts about {self.per_call_ns * unit:.0f} ns, too short for the timer alone",
                NoteKind.ROUTINE,
            ))  # fmt: skip
        return blocks * unit

    def _check(self, total_ns: float) -> None:
        if not math.isfinite(total_ns) or total_ns < 0:
            raise MeasurementError(self.spec.test_id, f"measurement {self.spec.name!r} produced timing {total_ns}")

    def _after_rounds_s(self) -> float:
        """Time to keep free after the rounds: the CPU memory probe's one call."""
        return self.per_call_ns / 1e9 if self.guard.measures_peak_memory else 0.0

    def _sample_s(self) -> float:
        return self.per_call_ns * self.calls_per_sample / 1e9

    def round(self, budget_s: float) -> list[float]:
        """One round of about ``budget_s`` seconds, cut to what ends before the time limit; its per-call samples."""
        from pytest_gpuperf.profiling.nsight import capture_range
        from pytest_gpuperf.profiling.nvtx_ranges import nvtx_range

        block_s = self._sample_s()
        reserve_s = self._after_rounds_s()
        fit = self.rule.samples_that_fit(self.elapsed_s(), block_s, reserve_s)
        room = (self.rule.max_samples or MAX_SAMPLES) - len(self.samples)
        count = max(1, min(room, int(budget_s / max(block_s, 1e-9)), fit))
        # The wall clock also stops a round early: at twice its budget, or where the next
        # sample would no longer end before the time limit.
        last_start_s = self.deadline - (block_s + reserve_s) * LIMIT_MARGIN
        label = f"{self.spec.test_id}::{self.spec.name}"
        t0 = time.perf_counter()
        deadline_ns = min(t0 + budget_s * 2, last_start_s) * 1e9
        with (
            self.guard.pinned(),
            nvtx_range(label, enabled=self.runner.options.nvtx),
            capture_range(self.runner.options.nsight, self.device) as capture,
            self._limited("measurement rounds"),
        ):
            self.accounting.begin_round()
            accounted = self.accounting.blocks()
            observer: BlockObserver = self.accounting
            if self.sampler is not None:  # its NVML reads outside the accounting's, which would charge them as waits
                self.sampler.begin_round()
                observer = BlockObservers(self.sampler, self.accounting)
            totals = self.timer.time_blocks(
                self._call, self.calls_per_sample, count, self._between(), deadline_ns=deadline_ns, observer=observer,
            )  # fmt: skip
            if self.sampler is not None:
                self.sampler.end_round()
        self.measured_s += time.perf_counter() - t0
        if capture.note:
            self.notes.append(Note(capture.note))
        for total in totals:
            self._check(total)
        per_call = [t / self.calls_per_sample for t in totals]
        launched = [h / self.calls_per_sample for h in self.timer.host_block_ns()]
        self.samples.extend(per_call)
        self.host_samples.extend(launched)
        self.total_calls += len(totals) * self.calls_per_sample
        self.round_medians.append(statistics.median(per_call))
        scheduling = self.accounting.scheduling(self.calls_per_sample, tuple(launched), since=accounted)
        self.last_corrected = list(correct(per_call, scheduling).samples_ns)
        self.corrected_round_medians.append(statistics.median(self.last_corrected))
        # Track drift: the next round's size follows what the function costs now.
        self.per_call_ns = self.round_medians[-1]
        if self.reference is not None:
            with self.guard.pinned():  # the machine's reference, on the same core at the same moments
                self.reference.step()
        return per_call

    def _between(self) -> Callable[[], None] | None:
        """What runs between the blocks of a round: the L2 flush, the deadline where no signal can stop a call."""
        flush = self._flusher.flush if self._flusher is not None and self._flusher.active else None
        before = self.spec.before_block
        if signals_usable() and before is None:
            return flush

        def between() -> None:
            if not signals_usable():
                check_deadline(self.deadline, lambda: self._timeout("measurement rounds"))
            if before is not None:
                before()
            if flush is not None:
                flush()

        return between

    def precision(self) -> float:
        return sample_precision(self.samples)

    def progress(self) -> Progress:
        """Where the measurement stands, for the stopping rule; the next round is at least one sample."""
        return Progress(
            samples=len(self.samples),
            rounds=len(self.round_medians),
            measured_s=self.measured_s,
            elapsed_s=self.elapsed_s(),
            next_round_s=self._sample_s() + self._after_rounds_s(),
            sample_s=self._sample_s(),
        )

    def run_to_completion(self) -> None:
        """Rounds until the stopping rule says enough (stopping.py)."""
        while True:
            self.stop = self.rule.check(self.progress(), self.precision)
            if self.stop is not None:
                return
            self.round(self.rule.round_s)

    def finish(self, *, peak_memory: bool = True) -> Measurement:
        """Stop health monitoring, read memory peaks, profile if asked, and build the Measurement.

        ``peak_memory`` False: no call of its own for the peak (the CPU guard's), for a reading whose
        memory nobody reads (a baseline write's fresh ones: the entry keeps the session's).
        """
        if not self.samples:
            raise MeasurementError(self.spec.test_id, f"measurement {self.spec.name!r} took no samples")
        unstable: str | None = None
        health: dict[str, object] = {}
        if self.health is not None:
            report = self.health.stop()
            unstable = report.unstable_reason
            self.notes.extend(report.notes)
            health = dict(report.data)
        sampled = self._device_report()
        unstable = sampled.unstable_reason or unstable  # the samples' own readings say which ones slowed
        precision = self.precision()
        target = self.spec.settings.target_precision
        shortfall = self.rule.shortfall_note(len(self.samples))
        if shortfall is not None:
            self.notes.append(Note(shortfall))
        elif precision > target:
            self.notes.append(Note(f"precision {precision:.1%} above target {target:.1%} at the time budget "
                                   f"({self.spec.settings.max_time_s:g}s)", NoteKind.ROUTINE))  # fmt: skip
        if self._flusher is not None:
            self._flusher.close()
        # before the profile: the probe counts against the time limit
        peak_allocated = self._peak_allocated(peak_memory)
        profile = self._profile()
        return Measurement(
            test_id=self.spec.test_id,
            name=self.spec.name,
            samples_ns=tuple(self.samples),
            calls_per_sample=self.calls_per_sample,
            device=str(self.device),
            timer=self.timer.name,
            round_medians_ns=tuple(self.round_medians),
            precision=precision if math.isfinite(precision) else None,
            reference_ns=dict(self.reference.result()) if self.reference is not None else {},
            peak_allocated_bytes=peak_allocated,
            peak_reserved_bytes=self.memory.peak_reserved(),
            throughput=self.spec.throughput,
            metrics=(*self.spec.metrics, *self._host_time(), *((sampled.energy,) if sampled.energy else ())),
            warmup_calls=self.warmup_calls,
            total_calls=self.total_calls,
            wall_time_s=time.perf_counter() - self.started,
            unstable_reason=unstable,
            notes=tuple(self.notes),
            health=health,
            profile=profile,
            scheduling=self._scheduling(),
            corrected_round_medians_ns=tuple(self.corrected_round_medians),
            device_state=sampled.state,
        )

    def _device_report(self) -> DeviceReport:
        """What the device sampler read beside the samples (its notes kept); an empty report where there is none."""
        from pytest_gpuperf.gpu.device_state import DeviceReport

        if self.sampler is None:
            return DeviceReport()
        report = self.sampler.finish(self.samples, energy=self.spec.settings.energy)
        self.notes.extend(report.notes)
        return report

    def _scheduling(self) -> Scheduling | None:
        """Every block's accounting, per call; on a device, with the host's launch time of each sample."""
        self.accounting.close()
        launch = tuple(self.host_samples) if len(self.host_samples) == len(self.samples) else ()
        scheduling = self.accounting.scheduling(self.calls_per_sample, launch)
        if scheduling is None or len(scheduling.caller_wait_ns) != len(self.samples):
            return None  # a round that broke off between a block and its accounting: none, rather than misaligned
        return scheduling

    def _host_time(self) -> tuple[Metric, ...]:
        """The host's median time per call (launching, without a sync) where the timer measures device time."""
        if not self.host_samples:
            return ()
        return (
            Metric(
                HOST_TIME_METRIC, statistics.median(self.host_samples), unit="ns", better="lower",
                tolerance=HOST_TIME_TOLERANCE,
                description="host (CPU) time per call to run and launch the function, without a sync; "
                "the time samples are the device's",
            ),
        )  # fmt: skip

    def _peak_allocated(self, call: bool = True) -> int | None:
        """The allocator's peak where it keeps one (CUDA), else the host guard's one more call if it fits (``call``)."""
        peak = self.memory.peak_allocated()
        if peak is not None or not self.guard.measures_peak_memory or not call:
            return peak
        if not self.rule.fits(self.elapsed_s(), self.per_call_ns / 1e9):
            limit = self.spec.settings.time_limit_s
            self.notes.append(Note(f"peak memory not measured: one more call would pass the {limit:g} s "
                                   "time limit (--gpuperf-time-limit)"))  # fmt: skip
            return None
        with self._limited("memory probe"):
            if self.spec.before_block is not None:
                self.spec.before_block()
            return self.guard.peak_memory(self._call)

    def _profile(self) -> ProfileSummary | None:
        """A short torch.profiler capture after the timed samples, never during them."""
        out = self.runner.options.profile_dir
        if out is None:
            return None
        from pytest_gpuperf.profiling.torch_profile import capture_calls, safe_label

        label = f"{self.spec.test_id}::{self.spec.name}"
        trace = out / f"{safe_label(label)}.json"
        capture = capture_calls(self.spec.fn, self.spec.args, dict(self.spec.kwargs), trace_path=trace, label=label,
                                device=self.device)  # fmt: skip
        if capture.trace_error:
            self.notes.append(Note(capture.trace_error))
        return capture.summary()


class Runner:
    """Turns MeasureSpecs into Measurements on one device."""

    def __init__(self, options: RunnerOptions) -> None:
        from pytest_gpuperf.measure.host import guard_for

        settle_allocator()  # every measuring process in one allocator state (allocator.py)
        self.options = options
        self.guard: HostGuard = options.guard or guard_for(options.device, plan=plan_for(Mode.BASELINE), pin_cpu="off")

    def prepare(self, spec: MeasureSpec) -> PreparedMeasurement:
        return PreparedMeasurement(self, spec)

    def profile(
        self,
        spec: MeasureSpec,
        *,
        trace_path: Path | None,
        label: str,
        calls: int,
        budget_s: float | None = None,
        warm_call_s: float | None = None,
    ) -> ProfileCapture:
        """One untimed torch.profiler pass over ``calls`` calls of ``spec``, for a differential profile (no shapes
        or memory); the trace at ``trace_path`` (None: none written); ``budget_s``: no more calls than fit in it;
        ``warm_call_s``: one call's length where this runner just measured ``spec`` (capture_calls)."""
        from pytest_gpuperf.profiling.capture import capture_calls

        deadline = time.perf_counter() + spec.settings.time_limit_s
        timeout = MeasurementTimeout(
            spec.test_id, f"profiling {spec.name!r} ran past its {spec.settings.time_limit_s:g} s time limit"
        )
        with hard_limit(deadline, lambda: timeout), in_autograd_mode(spec.autograd):
            return capture_calls(spec.fn, spec.args, dict(spec.kwargs), trace_path=trace_path, label=label,
                                 device=self.options.device, calls=calls, detailed=False,
                                 budget_s=budget_s, warm_call_s=warm_call_s)  # fmt: skip

    def measure(self, spec: MeasureSpec) -> Measurement:
        prepared = self.prepare(spec)
        prepared.run_to_completion()
        return prepared.finish()

    def smoke(self, spec: MeasureSpec) -> Measurement:
        """One call, synchronized, wall-clock timed: a correctness run of the perf test (no time limit)."""
        timer = timer_for(self.options.device)
        start = time.perf_counter_ns()
        result = spec.fn(*spec.args, **dict(spec.kwargs))
        said = check_lazy_result(result, spec)
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
            notes=(
                Note("smoke run: one call, not a measurement (use --gpuperf)", NoteKind.ROUTINE),
                *((Note(said),) if said is not None else ()),
            ),
        )
