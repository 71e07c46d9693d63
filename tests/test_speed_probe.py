"""The speed probe: how it reads the machine, and which reading a session records."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from pytest_gpuperf.measure.host.cpu import speed_probe
from pytest_gpuperf.measure.host.cpu.calibration import CalibrationWorkload
from pytest_gpuperf.measure.host.cpu.speed_probe import (
    PROBE_REPEATS,
    PROBE_STEPS,
    SessionSpeedProbe,
    is_slow,
    measure_speed_probe,
    slowdown,
)


@pytest.fixture
def two_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_probe_runs_on_one_thread_and_gives_the_threads_back(
    monkeypatch: pytest.MonkeyPatch, two_threads: None
) -> None:
    threads_while_stepping: list[int] = []
    real_step = CalibrationWorkload.step

    def step(self: CalibrationWorkload) -> None:
        threads_while_stepping.append(torch.get_num_threads())
        real_step(self)

    monkeypatch.setattr(CalibrationWorkload, "step", step)
    probe = measure_speed_probe(torch.device("cpu"))
    assert probe is not None and probe > 0
    assert threads_while_stepping == [1] * (PROBE_STEPS * PROBE_REPEATS)
    assert torch.get_num_threads() == 2


def test_probe_is_the_median_of_its_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    # one reading caught in a slow moment must not move the probe
    readings = iter([30_000.0, 90_000.0, 31_000.0])
    monkeypatch.setattr(CalibrationWorkload, "step", lambda self: None)
    monkeypatch.setattr(CalibrationWorkload, "result_ns", lambda self: next(readings))
    assert PROBE_REPEATS == 3
    assert measure_speed_probe(torch.device("cpu")) == 31_000.0


def test_probe_is_cpu_only() -> None:
    assert measure_speed_probe(torch.device("meta")) is None
    assert speed_probe.probes_speed(torch.device("cpu"))


def test_slowdown_and_the_slow_rule() -> None:
    assert slowdown(50.0, 40.0) == pytest.approx(1.25)
    assert slowdown(None, 40.0) is None and slowdown(50.0, None) is None and slowdown(50.0, 0.0) is None
    assert is_slow(1.25) and not is_slow(1.2) and not is_slow(None)


def readings(*values: float | None) -> SessionSpeedProbe:
    taken = iter(values)
    return SessionSpeedProbe(lambda: next(taken))


def test_gating_probes_once() -> None:
    probe = readings(40.0, 20.0)
    assert probe.once() == 40.0
    assert probe.once() == 40.0  # a second call would have read 20.0


def test_writing_baselines_keeps_the_fastest_reading_so_far() -> None:
    probe = readings(40.0, 45.0, 35.0, None, 42.0)  # none slow against the fastest: no waiting
    assert [probe.settled_fastest()[0] for _ in range(5)] == [40.0, 40.0, 35.0, 35.0, 35.0]
    assert probe.once() == 35.0  # already taken: no new reading


def test_writing_baselines_waits_while_a_reading_is_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr("pytest_gpuperf.measure.host.cpu.speed_probe.time.sleep", waits.append)
    probe = readings(40.0, 52.0, 48.0, 41.0, 30.0)
    assert probe.settled_fastest() == (40.0, None)  # nothing to compare the first with: no wait
    # x1.30, x1.20: one step of waiting, and the fastest so far stays the reference
    assert probe.settled_fastest() == (40.0, "waited 1s for the machine to recover (speed probe x1.20 then)")
    assert waits == [1.0]
    assert probe.settled_fastest() == (40.0, None)  # x1.03
    assert probe.settled_fastest() == (30.0, None)  # faster than ever: the new reference
    assert probe.fastest_ns == 30.0


def test_no_reading_off_the_cpu() -> None:
    probe = readings(None, None, None)
    assert probe.once() is None
    assert probe.settled_fastest() == (None, None)
