from __future__ import annotations

import math
import time

import pytest
import torch

from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.errors import MeasurementError
from pytest_gpuperf.model import Throughput
from pytest_gpuperf.runner import MeasureSpec, Runner, RunnerOptions
from pytest_gpuperf.timers import CPU_MIN_SAMPLE_NS, WallTimer

FAST = MeasureSettings(warmup_time_s=0.01, min_time_s=0.03, max_time_s=0.3, target_precision=0.05)


def _runner() -> Runner:
    return Runner(RunnerOptions(device=torch.device("cpu"), nvtx=True))


def test_wall_timer_times_blocks_and_runs_between_outside() -> None:
    calls: list[str] = []
    totals = WallTimer().time_blocks(lambda: calls.append("c"), 3, 4, between=lambda: calls.append("b"))
    assert len(totals) == 4
    assert calls == ["b", "c", "c", "c"] * 4
    assert all(t >= 0 for t in totals)


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
    m = _runner().measure(MeasureSpec(fn=torch.mm, args=(a, a), test_id="t", settings=FAST))
    assert len(m.round_medians_ns) >= 3
    assert m.precision is not None and math.isfinite(m.precision)
    assert len(m.samples_ns) >= 10


def test_stops_at_max_time_when_precision_unreachable() -> None:
    settings = MeasureSettings(warmup_time_s=0.0, min_time_s=0.0, max_time_s=0.15, target_precision=1e-6)
    start = time.perf_counter()
    m = _runner().measure(MeasureSpec(fn=time.sleep, args=(0.001,), test_id="t", settings=settings))
    assert time.perf_counter() - start < 3.0
    assert any("precision" in n for n in m.notes)


def test_throughput_rates_from_median() -> None:
    settings = FAST
    m = _runner().measure(
        MeasureSpec(fn=time.sleep, args=(0.001,), test_id="t", throughput=Throughput(items=10, flops=1e6),
                    settings=settings)
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

    monkeypatch.setattr("pytest_gpuperf.runner.timer_for", lambda device, **_: NanTimer())
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
    from pytest_gpuperf.host import guard_for

    quiet = guard_for(torch.device("cpu"), mode="baseline", pin_cpu="off", peak_memory=False)
    time_only = Runner(RunnerOptions(device=torch.device("cpu"), guard=quiet)).measure(spec)
    assert time_only.peak_allocated_bytes is None
    assert time_only.samples_ns
