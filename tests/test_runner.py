from __future__ import annotations

import dataclasses
import gc
import math
import re
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import torch

from pytest_gpuperf.config import MeasureSettings, Mode
from pytest_gpuperf.errors import MeasurementError, MeasurementTimeout
from pytest_gpuperf.gpu.nvml import HW_SLOWDOWN
from pytest_gpuperf.measure.host.cuda import CudaHostGuard
from pytest_gpuperf.measure.runner import MeasureSpec, Runner, RunnerOptions
from pytest_gpuperf.measure.timers import CPU_MIN_SAMPLE_NS, BlockObservers, WallTimer
from pytest_gpuperf.model import EnergySource, Throughput
from pytest_gpuperf.modes import plan_for
from tests.nvml_fake import FakeNvml

FAST = MeasureSettings(warmup_time_s=0.01, min_time_s=0.03, max_time_s=0.3, target_precision=0.05)


def _runner() -> Runner:
    return Runner(RunnerOptions(device=torch.device("cpu"), nvtx=True))


def test_wall_timer_times_blocks_and_runs_between_outside() -> None:
    calls: list[str] = []
    totals = WallTimer().time_blocks(lambda: calls.append("c"), 3, 4, between=lambda: calls.append("b"))
    assert len(totals) == 4
    assert calls == ["b", "c", "c", "c"] * 4
    assert all(t >= 0 for t in totals)


def test_observers_enclose_one_another_around_each_block() -> None:
    seen: list[str] = []

    class Observer:
        def __init__(self, name: str) -> None:
            self.name = name

        def before_block(self) -> None:
            seen.append(f"{self.name} before")

        def after_block(self, block_ns: float) -> None:
            seen.append(f"{self.name} after")

    WallTimer().time_blocks(
        lambda: seen.append("call"), 1, 2, observer=BlockObservers(Observer("outer"), Observer("inner"))
    )
    assert seen == ["outer before", "inner before", "call", "inner after", "outer after"] * 2


def test_fast_function_is_grouped_into_timeable_samples() -> None:
    m = _runner().measure(MeasureSpec(fn=lambda: None, test_id="t", name="noop", settings=FAST))
    assert m.calls_per_sample > 1
    # a sample is a block of calls lasting at least about the timer's minimum
    assert m.stats.median_ns * m.calls_per_sample >= CPU_MIN_SAMPLE_NS / 4
    assert m.total_calls >= m.calls_per_sample * len(m.samples_ns)
    assert m.timer == "perf_counter" and m.device == "cpu"


def test_slow_function_is_timed_call_by_call_and_per_call_time_is_right() -> None:
    m = _runner().measure(MeasureSpec(fn=time.sleep, args=(0.002,), test_id="t", settings=FAST))
    assert m.calls_per_sample == 1
    assert 1.9e6 <= m.stats.min_ns < 20e6  # sleep never returns early; generous upper bound


def test_rounds_give_round_medians_and_precision() -> None:
    a = torch.randn(64, 64)
    # precise after the three rounds min_time asks for; the roomy max_time only absorbs a loaded machine's stalls
    settings = dataclasses.replace(FAST, max_time_s=2.0)
    m = _runner().measure(MeasureSpec(fn=torch.mm, args=(a, a), test_id="t", settings=settings))
    assert len(m.round_medians_ns) >= 3
    assert m.precision is not None and math.isfinite(m.precision)
    assert len(m.samples_ns) >= 10


def test_stops_at_max_time_when_precision_unreachable() -> None:
    settings = MeasureSettings(warmup_time_s=0.0, min_time_s=0.0, max_time_s=0.15, target_precision=1e-6)
    start = time.perf_counter()
    m = _runner().measure(MeasureSpec(fn=time.sleep, args=(0.001,), test_id="t", settings=settings))
    assert time.perf_counter() - start < 3.0
    assert any("precision" in n for n in [x.text for x in m.notes])


def test_throughput_rates_from_median() -> None:
    settings = FAST
    m = _runner().measure(
        MeasureSpec(
            fn=time.sleep, args=(0.001,), test_id="t", throughput=Throughput(items=10, flops=1e6), settings=settings
        )
    )
    rates = m.rates
    seconds = m.stats.median_ns / 1e9
    assert rates["items_per_s"] == pytest.approx(10 / seconds)
    assert rates["flop_per_s"] == pytest.approx(1e6 / seconds)


def test_exception_in_function_propagates_unchanged() -> None:
    def boom() -> None:
        raise ValueError("user bug")

    with pytest.raises(ValueError, match="user bug"):
        _runner().measure(MeasureSpec(fn=boom, test_id="t", settings=FAST))


def test_non_finite_timing_is_a_measurement_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class NanTimer(WallTimer):
        def time_blocks(self, call, calls, samples, between=None):  # type: ignore[no-untyped-def]
            return [math.nan] * samples

    monkeypatch.setattr("pytest_gpuperf.measure.runner.timer_for", lambda device, **_: NanTimer())
    with pytest.raises(MeasurementError, match="t: measurement 'default' produced timing nan"):
        _runner().measure(MeasureSpec(fn=lambda: None, test_id="t", settings=FAST))


def test_smoke_calls_once() -> None:
    calls = []
    m = _runner().smoke(MeasureSpec(fn=lambda: calls.append(1), test_id="t"))
    assert calls == [1]
    assert len(m.samples_ns) == 1 and m.total_calls == 1


def _allocates() -> torch.Tensor:
    return torch.ones(64 * 1024)  # 256 KiB of tensor memory per call


def test_cpu_peak_memory_probe_can_be_switched_off_for_time_only_workers() -> None:
    spec = MeasureSpec(fn=_allocates, settings=FAST)
    probed = _runner().measure(spec)
    assert probed.peak_allocated_bytes is not None and probed.peak_allocated_bytes >= 64 * 1024 * 4
    from pytest_gpuperf.measure.host import guard_for

    quiet = guard_for(torch.device("cpu"), plan=plan_for(Mode.BASELINE), pin_cpu="off", peak_memory=False)
    time_only = Runner(RunnerOptions(device=torch.device("cpu"), guard=quiet)).measure(spec)
    assert time_only.peak_allocated_bytes is None
    assert time_only.samples_ns


class Counted:
    """A function that sleeps ``seconds`` per call and counts its calls."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        time.sleep(self.seconds)


def test_slow_function_gets_min_samples_past_a_small_budget_without_extra_calls() -> None:
    slow = Counted(0.03)
    settings = MeasureSettings(warmup_time_s=0.01, min_time_s=0.0, max_time_s=0.05, target_precision=0.5)
    m = _runner().measure(MeasureSpec(fn=slow, test_id="t", settings=settings))
    assert len(m.samples_ns) == settings.min_samples == 6  # max_time held two; the budget extended to six
    assert m.calls_per_sample == 1 and m.warmup_calls == 1
    assert slow.calls == 1 + 6 + 1  # one warm-up call, one per sample, one for the CPU memory probe
    assert m.precision is not None  # the CI of the median exists from six samples
    assert not any("fewer than" in n for n in [x.text for x in m.notes])


def test_time_limit_cuts_the_samples_short_with_a_note() -> None:
    slow = Counted(0.03)
    settings = MeasureSettings(warmup_time_s=0.01, min_time_s=0.0, max_time_s=0.05, time_limit_s=0.15)
    m = _runner().measure(MeasureSpec(fn=slow, test_id="t", settings=settings))
    assert 1 <= len(m.samples_ns) < 6  # six samples and the warm-up take 0.21 s
    n = len(m.samples_ns)
    assert (
        f"{n} sample{'s' if n > 1 else ''}, fewer than the 6 a verdict needs, within the 0.15 s time limit "
        "(--gpuperf-time-limit)"
    ) in [x.text for x in m.notes]
    assert m.precision is None and not any(n.startswith("precision") for n in [x.text for x in m.notes])


def test_memory_probe_is_left_out_when_one_more_call_would_pass_the_limit() -> None:
    settings = MeasureSettings(warmup_time_s=0.0, min_time_s=0.0, max_time_s=0.05, time_limit_s=0.3)
    prepared = _runner().prepare(MeasureSpec(fn=_allocates_slowly, test_id="t", settings=settings))
    prepared.round(0.0)
    time.sleep(max(0.0, 0.3 - prepared.elapsed_s()))  # the rest of the limit goes elsewhere
    m = prepared.finish()
    assert m.peak_allocated_bytes is None
    unmeasured = "peak memory not measured: one more call would pass the 0.3 s time limit (--gpuperf-time-limit)"
    assert unmeasured in [x.text for x in m.notes]


def _allocates_slowly() -> torch.Tensor:
    time.sleep(0.05)
    return torch.ones(1024)


def test_a_call_that_hangs_in_the_rounds_is_stopped_at_the_limit() -> None:
    hang = threading.Event()

    def work() -> None:
        time.sleep(30 if hang.is_set() else 0.001)

    settings = MeasureSettings(warmup_time_s=0.01, min_time_s=0.0, max_time_s=0.05, time_limit_s=0.5)
    prepared = _runner().prepare(MeasureSpec(fn=work, test_id="tests/t.py::test_x", name="step", settings=settings))
    hang.set()
    with pytest.raises(MeasurementTimeout) as caught:
        prepared.run_to_completion()
    assert str(caught.value).startswith(
        "tests/t.py::test_x: measurement 'step' ran past its 0.5 s time limit during the measurement rounds"
    )
    assert "--gpuperf-time-limit" in str(caught.value)


def test_off_the_main_thread_a_call_past_the_limit_fails_once_it_returns() -> None:
    raised: list[BaseException] = []

    def measure() -> None:
        settings = MeasureSettings(warmup_time_s=0.01, min_time_s=0.0, max_time_s=0.05, time_limit_s=0.05)
        try:
            _runner().measure(MeasureSpec(fn=time.sleep, args=(0.2,), test_id="t", settings=settings))
        except MeasurementTimeout as exc:
            raised.append(exc)

    thread = threading.Thread(target=measure)
    thread.start()
    thread.join()
    assert len(raised) == 1 and "during the warm-up" in str(raised[0])


def test_smoke_run_has_no_time_limit() -> None:
    settings = MeasureSettings(time_limit_s=0.001)
    m = _runner().smoke(MeasureSpec(fn=time.sleep, args=(0.01,), test_id="t", settings=settings))
    assert len(m.samples_ns) == 1


def _generator() -> Iterator[int]:
    ran.append("generator")
    yield 1


async def _coroutine() -> int:
    ran.append("coroutine")
    return 1


async def _async_generator() -> AsyncIterator[int]:
    ran.append("async generator")
    yield 1


ran: list[str] = []


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (
            _generator,
            "returned a generator: its body never runs when called; measure a function that does the "
            "work (e.g. lambda: list(gen()))",
        ),
        (
            _coroutine,
            "returned a coroutine: its body never runs when called; measure a function that does the "
            "work (e.g. lambda: asyncio.run(coro()))",
        ),
        (_async_generator, "returned an async generator: its body never runs when called"),
    ],
)
@pytest.mark.parametrize("mode", ["measure", "smoke"])
def test_a_lazy_result_is_a_measurement_error_and_nothing_is_measured(
    fn: Callable[[], object], message: str, mode: str
) -> None:
    ran.clear()
    spec = MeasureSpec(fn=fn, test_id="tests/t.py::test_lazy", settings=FAST)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = re.escape(f"tests/t.py::test_lazy: measurement 'default' {message}")
        with pytest.raises(MeasurementError, match=expected):
            getattr(_runner(), mode)(spec)
        gc.collect()
    assert ran == []
    assert not [w for w in caught if "never awaited" in str(w.message)]


# --- the device's state beside the samples (NVML, through its fake on the CPU) --------------------------


def _nvml_runner(fake: FakeNvml) -> Runner:
    """A runner with the CUDA guard reading ``fake``: its per-sample readings and energy, timed on the CPU."""
    cpu = torch.device("cpu")
    return Runner(RunnerOptions(device=cpu, guard=CudaHostGuard(cpu, nvml=fake)))


def _matmul() -> torch.Tensor:
    x = torch.ones(32, 32)
    return x @ x


def test_the_device_state_is_read_beside_every_sample_and_energy_gated_where_asked() -> None:
    fake = FakeNvml(energy_clock=time.perf_counter)  # a device drawing 300 W, its counter on the runner's clock
    spec = MeasureSpec(fn=_matmul, test_id="t", settings=dataclasses.replace(FAST, energy=True))
    m = _nvml_runner(fake).measure(spec)
    state = m.device_state
    assert state is not None and state.samples == len(m.samples_ns)
    assert 1 <= state.readings <= len(m.samples_ns)
    assert state.sm_clock_mhz == (1980.0,) * len(m.samples_ns)
    assert state.summary.power_w == 300.0 and state.energy_source is EnergySource.COUNTER
    energy = m.metric("energy")
    assert energy is not None and energy.unit == "J" and energy.better == "lower"
    # the counter's mean power over the rounds (300 W) times the mean time per call
    assert energy.value == pytest.approx(300 * m.stats.mean_ns / 1e9, rel=0.02)
    assert m.unstable_reason is None


def test_energy_is_a_metric_only_where_asked() -> None:
    m = _nvml_runner(FakeNvml()).measure(MeasureSpec(fn=_matmul, test_id="t", settings=FAST))
    assert m.device_state is not None and m.metric("energy") is None


def test_a_hardware_slowdown_in_the_samples_readings_makes_the_measurement_unstable() -> None:
    m = _nvml_runner(FakeNvml(reasons=HW_SLOWDOWN)).measure(MeasureSpec(fn=_matmul, test_id="t", settings=FAST))
    n = len(m.samples_ns)
    assert m.unstable_reason == f"GPU clocks were slowed during {n} of {n} samples: hw_slowdown"


def test_a_cpu_reads_no_device_state_and_says_energy_was_not_measured() -> None:
    spec = MeasureSpec(fn=_matmul, test_id="t", settings=dataclasses.replace(FAST, energy=True))
    m = _runner().measure(spec)
    assert m.device_state is None and m.metric("energy") is None
    assert "energy requested but not measured: NVML reads a CUDA device's energy, not cpu's" in [
        n.text for n in m.notes
    ]
