"""The device sampler: NVML read beside every sample at a bounded cost, energy per call, driven by the fake."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from pytest_gpuperf.gpu.device_state import ENERGY_TOLERANCE, DeviceSampler
from pytest_gpuperf.gpu.nvml import GPU_IDLE, HW_SLOWDOWN, HW_THERMAL_SLOWDOWN, SW_POWER_CAP
from pytest_gpuperf.model import ENERGY_METRIC, DeviceState, DeviceSummary, EnergySource
from tests.nvml_fake import FakeNvml

US = 1_000
MS = 1_000_000


class Clock:
    """Nanoseconds that move only when told: a reading costs ``read_ns`` (the clock advances per call)."""

    def __init__(self, step_ns: int = 0) -> None:
        self.now = 0
        self.step_ns = step_ns

    def __call__(self) -> int:
        self.now += self.step_ns
        return self.now


def sampler(fake: FakeNvml, clock: Clock | None = None, **kwargs: object) -> DeviceSampler:
    s = DeviceSampler(0, nvml=fake, clock=clock or Clock(), **kwargs)  # type: ignore[arg-type]
    s.start()
    return s


def run_round(s: DeviceSampler, blocks: int, *, clock: Clock | None = None, block_ns: int = 0,
              during: Callable[[int], None] | None = None) -> None:  # fmt: skip
    """One round of ``blocks`` blocks, ``block_ns`` apart on ``clock``; ``during(i)`` before block i's end."""
    s.begin_round()
    for i in range(blocks):
        s.before_block()
        if clock is not None:
            clock.now += block_ns
        if during is not None:
            during(i)
        s.after_block(float(block_ns))
    s.end_round()


# --- without NVML ---------------------------------------------------------------------------------


def test_without_nvml_nothing_is_read_and_energy_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    s = DeviceSampler(0)
    s.start()
    run_round(s, 3)
    assert not s.active
    report = s.finish([1.0, 1.0, 1.0], energy=True)
    assert report.state is None and report.energy is None and report.unstable_reason is None
    assert len(report.notes) == 1
    assert report.notes[0].text.startswith("energy per call not measured: NVML unavailable: pynvml is not importable")
    assert s.finish([1.0], energy=False).notes == ()


def test_a_device_nvml_does_not_know_is_not_read() -> None:
    fake = FakeNvml(unsupported=frozenset({"device_handle"}))
    s = sampler(fake)
    run_round(s, 2)
    assert s.finish([1.0, 1.0]).state is None
    assert fake.reason_reads == 0


# --- readings ---------------------------------------------------------------------------------------


def test_every_sample_gets_the_state_read_beside_it() -> None:
    fake = FakeNvml()
    s = sampler(fake)  # readings cost nothing on this clock: every block is read

    def heat(i: int) -> None:
        fake.clocks[("sm", "current")] = 1980 - 10 * i
        fake.temperature = 40 + i
        fake.power = 300_000 + 1000 * i

    run_round(s, 4, during=heat)
    state = s.finish([1.0] * 4).state
    assert state is not None
    assert state.sm_clock_mhz == (1980.0, 1970.0, 1960.0, 1950.0)
    assert state.temperature_c == (40.0, 41.0, 42.0, 43.0)
    assert state.power_w == (300.0, 301.0, 302.0, 303.0)
    assert state.mem_clock_mhz == (2619.0,) * 4
    assert state.reasons == (0,) * 4
    assert state.readings == 4
    assert state.summary == DeviceSummary(sm_clock_mhz=1965.0, mem_clock_mhz=2619.0, power_w=301.5,
                                          temperature_c=41.5)  # fmt: skip
    assert state.energy_source is None
    assert fake.initialized == 0  # shut down again


def test_readings_take_at_most_their_share_of_the_host_time() -> None:
    fake = FakeNvml()
    clock = Clock(step_ns=5 * US)  # each clock read 5 us: a reading (two reads around it) costs 5 us
    s = sampler(fake, clock, read_share=0.02)  # so one is due 250 us after the last
    seen: list[int] = []

    def change(i: int) -> None:
        fake.clocks[("sm", "current")] = 1000 + i
        seen.append(i)

    run_round(s, 20, clock=clock, block_ns=60 * US, during=change)
    state = s.finish([1.0] * 20).state
    assert state is not None
    # read at blocks 0, 4, 8, ... (60 us apart, plus the clock's own steps); the ones between carry the last reading
    read = sorted(set(state.sm_clock_mhz))
    assert 3 <= state.readings <= 6
    assert len(read) == state.readings
    assert state.sm_clock_mhz[0] == 1000.0
    assert all(state.sm_clock_mhz[i] in (state.sm_clock_mhz[i - 1], 1000.0 + i) for i in range(1, 20))
    assert state.reading_ns == pytest.approx(5 * US)


def test_the_first_block_of_every_round_is_read() -> None:
    fake = FakeNvml()
    clock = Clock(step_ns=MS)  # readings far too dear to repeat within a round
    s = sampler(fake, clock)
    run_round(s, 3)
    fake.clocks[("sm", "current")] = 1500
    run_round(s, 3)
    state = s.finish([1.0] * 6).state
    assert state is not None
    assert state.readings == 2
    assert state.sm_clock_mhz == (1980.0,) * 3 + (1500.0,) * 3


def test_a_reading_waits_for_the_block_before_while_the_host_runs_ahead() -> None:
    events: list[str] = []

    class Marks:
        def mark(self) -> None:
            events.append("mark")

        def wait(self) -> None:
            events.append("wait")

    class Logged(FakeNvml):
        def clock_event_reasons(self, handle: object) -> int:
            events.append("read")
            return super().clock_event_reasons(handle)

    s = sampler(Logged(), Clock(step_ns=MS), marks=Marks())  # only the round's first block is read
    events.clear()
    run_round(s, 3)
    assert events == ["wait", "read", "mark", "mark", "mark"]


def test_what_nvml_cannot_read_is_left_out_and_a_failing_read_carries_the_last_value() -> None:
    fake = FakeNvml(unsupported=frozenset({"power_mw", "temperature_c"}))
    s = sampler(fake)

    def lose_clocks(i: int) -> None:
        fake.unsupported = frozenset({"power_mw", "temperature_c", "clock_mhz"}) if i == 1 else fake.unsupported

    run_round(s, 2, during=lose_clocks)
    state = s.finish([1.0, 1.0]).state
    assert state is not None
    assert state.power_w == () and state.temperature_c == ()
    assert state.sm_clock_mhz == (1980.0, 1980.0)  # the second reading failed: the first one's value
    assert state.summary.power_w is None


def test_the_summary_leaves_out_readings_of_an_idle_device() -> None:
    fake = FakeNvml()
    s = sampler(fake)

    def idle_last(i: int) -> None:
        if i == 2:
            fake.reasons = GPU_IDLE
            fake.clocks[("sm", "current")] = 210

    run_round(s, 3, during=idle_last)
    state = s.finish([1.0] * 3).state
    assert state is not None
    assert state.sm_clock_mhz == (1980.0, 1980.0, 210.0)
    assert state.summary.sm_clock_mhz == 1980.0


def test_readings_that_do_not_line_up_with_the_samples_are_not_kept() -> None:
    s = sampler(FakeNvml())
    run_round(s, 3)
    report = s.finish([1.0, 1.0])  # a round that broke off between a block and its reading
    assert report.state is None
    assert "do not line up" in report.notes[0].text


def test_device_state_fields_must_line_up() -> None:
    with pytest.raises(ValueError, match="one value per sample"):
        DeviceState(sm_clock_mhz=(1.0, 2.0), power_w=(1.0,))
    assert DeviceState(sm_clock_mhz=(1.0, 2.0)).samples == 2


# --- hardware slowdowns -------------------------------------------------------------------------------


def test_a_hardware_slowdown_in_a_samples_reading_makes_the_measurement_unstable() -> None:
    fake = FakeNvml()
    s = sampler(fake)

    def slow_one(i: int) -> None:
        fake.reasons = HW_THERMAL_SLOWDOWN | HW_SLOWDOWN if i == 2 else SW_POWER_CAP

    run_round(s, 5, during=slow_one)
    report = s.finish([1.0] * 5)
    assert report.unstable_reason == "GPU clocks were slowed during 1 of 5 samples: hw_slowdown, hw_thermal_slowdown"
    assert report.state is not None and report.state.reasons[2] == HW_THERMAL_SLOWDOWN | HW_SLOWDOWN


def test_a_power_cap_alone_is_left_to_the_health_monitor() -> None:
    fake = FakeNvml(reasons=SW_POWER_CAP)
    s = sampler(fake)
    run_round(s, 3)
    assert s.finish([1.0] * 3).unstable_reason is None


# --- energy per call ------------------------------------------------------------------------------------


def test_energy_per_call_from_the_counter_is_the_rounds_mean_power_times_the_device_time() -> None:
    fake = FakeNvml(energy=1_000_000)
    clock = Clock()
    s = sampler(fake, clock)

    def draw(i: int) -> None:  # 250 W over each 2 ms block: 500 mJ
        fake.energy += 500

    run_round(s, 4, clock=clock, block_ns=2 * MS, during=draw)
    run_round(s, 4, clock=clock, block_ns=2 * MS, during=draw)
    report = s.finish([1.0 * MS] * 8, energy=True)  # 1 ms per call: two calls a block
    assert report.energy is not None
    assert report.energy.name == ENERGY_METRIC and report.energy.unit == "J" and report.energy.better == "lower"
    assert report.energy.tolerance == ENERGY_TOLERANCE
    assert report.energy.value == pytest.approx(0.25)  # 250 W x 1 ms
    assert "energy counter" in report.energy.description
    assert report.state is not None and report.state.energy_source is EnergySource.COUNTER
    assert report.notes == ()


def test_without_a_counter_energy_is_the_power_readings_times_each_samples_time_and_says_so() -> None:
    fake = FakeNvml(unsupported=frozenset({"total_energy_mj"}))
    s = sampler(fake)

    def power(i: int) -> None:
        fake.power = (100_000, 300_000)[i]

    run_round(s, 2, during=power)
    report = s.finish([2.0 * MS, 1.0 * MS], energy=True)
    assert report.energy is not None
    assert report.energy.value == pytest.approx((100 * 2e-3 + 300 * 1e-3) / 2)
    assert report.state is not None and report.state.energy_source is EnergySource.POWER
    assert "no energy counter" in report.energy.description
    assert any("no energy counter" in n.text for n in report.notes)


def test_a_counter_that_does_not_advance_falls_back_to_power() -> None:
    fake = FakeNvml(power=200_000)
    clock = Clock()
    s = sampler(fake, clock)
    run_round(s, 2, clock=clock, block_ns=MS)
    report = s.finish([MS, MS], energy=True)
    assert report.energy is not None and report.energy.value == pytest.approx(0.2)
    assert report.state is not None and report.state.energy_source is EnergySource.POWER
    assert any("did not advance" in n.text for n in report.notes)


def test_a_counter_that_goes_back_is_not_read_again() -> None:
    fake = FakeNvml(energy=5_000)
    clock = Clock()
    s = sampler(fake, clock)
    run_round(s, 1, clock=clock, block_ns=MS, during=lambda i: setattr(fake, "energy", 10))  # the driver reloaded
    run_round(s, 1, clock=clock, block_ns=MS, during=lambda i: setattr(fake, "energy", 500))
    report = s.finish([MS, MS], energy=True)
    assert report.state is not None and report.state.energy_source is EnergySource.POWER


def test_without_counter_or_power_energy_is_a_note() -> None:
    s = sampler(FakeNvml(unsupported=frozenset({"total_energy_mj", "power_mw"})))
    run_round(s, 2)
    report = s.finish([MS, MS], energy=True)
    assert report.energy is None
    assert report.state is not None and report.state.energy_source is None
    assert [n.text for n in report.notes] == [
        "energy per call not measured: NVML reports neither an energy counter nor the power draw of this device"
    ]


def test_energy_is_only_measured_when_asked() -> None:
    s = sampler(FakeNvml(energy=0))
    run_round(s, 2)
    report = s.finish([MS, MS])
    assert report.energy is None and report.notes == ()
