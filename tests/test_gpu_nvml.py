"""The NVML adapter: degrading without NVML, probing, and slowdown detection driven by a fake."""

from __future__ import annotations

import sys
import time
import types
from typing import Any

import pytest

from pytest_gpuperf.gpu import nvml
from pytest_gpuperf.gpu.nvml import (
    APPLICATIONS_CLOCKS_SETTING,
    GPU_IDLE,
    HW_THERMAL_SLOWDOWN,
    SW_POWER_CAP,
    SW_THERMAL_SLOWDOWN,
    HealthMonitor,
    NvmlQueryError,
    PynvmlBackend,
    clocks_look_locked,
    decode_reasons,
    format_cuda_version,
    probe_device,
)
from pytest_gpuperf.model import Note
from tests.nvml_fake import FakeNvml

FAST = 0.001  # poll interval for tests: behaviour, not timing, is asserted


def locked_fake(**kwargs: Any) -> FakeNvml:
    fake = FakeNvml(**kwargs)
    fake.clocks[("sm", "applications")] = 1410  # moved off the default: looks locked
    return fake


@pytest.fixture
def no_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError


# --- without NVML -----------------------------------------------------------------------------


def test_probe_without_pynvml_is_a_note(no_pynvml: None) -> None:
    result = probe_device(0)
    assert list(result) == ["nvml"]
    assert result["nvml"].startswith("unavailable: pynvml is not importable")


def test_probe_with_the_real_library_never_raises() -> None:
    result = probe_device(0)  # this machine: no driver; a GPU runner: real data
    assert result.get("nvml", "").startswith("unavailable") or "name" in result


def test_monitor_without_nvml_degrades_to_a_note(no_pynvml: None) -> None:
    monitor = HealthMonitor(0)
    monitor.start()
    report = monitor.stop()
    assert report.unstable_reason is None
    assert len(report.notes) == 1
    assert report.notes[0].text.startswith("NVML unavailable: pynvml is not importable")
    assert report.data == {}


def test_monitor_when_init_fails() -> None:
    fake = FakeNvml(init_error="NVML Shared Library Not Found")
    monitor = HealthMonitor(0, nvml=fake, poll_interval_s=FAST)
    monitor.start()
    assert monitor.stop().notes == (Note("NVML unavailable: NVML Shared Library Not Found"),)


def test_monitor_when_the_device_is_unknown_to_nvml() -> None:
    fake = FakeNvml(unsupported=frozenset({"device_handle"}))
    monitor = HealthMonitor(3, nvml=fake, poll_interval_s=FAST)
    monitor.start()
    report = monitor.stop()
    assert report.notes[0].text.startswith("NVML unavailable for CUDA device 3")
    assert fake.initialized == 0


def test_stop_without_start_is_a_note_not_an_error() -> None:
    report = HealthMonitor(0, nvml=FakeNvml()).stop()
    assert report.unstable_reason is None
    assert "without being started" in report.notes[0].text


# --- probing ------------------------------------------------------------------------------------


def test_probe_reads_identity_clocks_and_settings() -> None:
    fake = FakeNvml(reasons=GPU_IDLE)
    result = probe_device(0, nvml=fake)
    assert result["name"] == "NVIDIA Fake GPU"
    assert result["uuid"] == fake.gpu_uuid
    assert result["driver"] == "550.54.15"
    assert result["cuda_driver_version"] == "12.4"
    assert result["sm_clock_mhz"] == "1980"
    assert result["mem_app_clock_mhz"] == "2619"
    assert result["power_limit_w"] == "700"
    assert result["temperature_c"] == "40"
    assert result["persistence_mode"] == "on"
    assert result["clock_event_reasons"] == "gpu_idle"
    assert result["clocks_locked"] == "no"
    assert fake.initialized == 0  # shut down again


def test_probe_leaves_out_what_nvml_cannot_answer() -> None:
    fake = FakeNvml(unsupported=frozenset({"clock_mhz:applications", "power_limit_mw", "clock_event_reasons"}))
    result = probe_device(0, nvml=fake)
    assert "sm_app_clock_mhz" not in result
    assert "power_limit_w" not in result
    assert "clock_event_reasons" not in result
    assert result["sm_default_app_clock_mhz"] == "1755"
    assert result["clocks_locked"] == "unknown"


def test_probe_sees_locked_application_clocks() -> None:
    assert probe_device(0, nvml=locked_fake())["clocks_locked"] == "yes"


@pytest.mark.parametrize(
    ("app", "default", "reasons", "expected"),
    [
        (1410, 1755, 0, "yes"),
        (1755, 1755, APPLICATIONS_CLOCKS_SETTING, "yes"),
        (1755, 1755, 0, "no"),
        (None, None, 0, "no"),
        (None, None, None, "unknown"),
        (None, 1755, APPLICATIONS_CLOCKS_SETTING, "yes"),
    ],
)
def test_clocks_look_locked(app: int | None, default: int | None, reasons: int | None, expected: str) -> None:
    assert clocks_look_locked(app, default, reasons) == expected


def test_decode_reasons_and_versions() -> None:
    assert decode_reasons(0) == []
    assert decode_reasons(SW_POWER_CAP | HW_THERMAL_SLOWDOWN) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_reasons(0x1000 | GPU_IDLE) == ["gpu_idle", "unknown_0x1000"]
    assert format_cuda_version(12040) == "12.4"
    assert format_cuda_version(11080) == "11.8"


# --- health monitoring ----------------------------------------------------------------------------


def run_monitor(fake: FakeNvml, during: Any = None, poll_interval_s: float = FAST) -> nvml.HealthReport:
    monitor = HealthMonitor(0, nvml=fake, poll_interval_s=poll_interval_s)
    monitor.start()
    if during is not None:
        during(fake)
    return monitor.stop()


def test_thermal_slowdown_makes_the_measurement_unstable() -> None:
    report = run_monitor(locked_fake(reasons=HW_THERMAL_SLOWDOWN))
    assert report.unstable_reason is not None
    assert "hw_thermal_slowdown" in report.unstable_reason
    assert report.data["clock_event_reasons"] == ["hw_thermal_slowdown"]


def test_a_throttle_that_starts_mid_measurement_is_seen() -> None:
    def heat_up(fake: FakeNvml) -> None:
        fake.reasons = SW_THERMAL_SLOWDOWN | SW_POWER_CAP
        fake.clocks[("sm", "current")] = 1000  # below 75% of the 1410 MHz applications clock
        fake.temperature = 87

    report = run_monitor(locked_fake(), during=heat_up)
    assert report.unstable_reason is not None
    assert "sw_power_cap" in report.unstable_reason
    assert "sw_thermal_slowdown" in report.unstable_reason
    assert "fell to 1000 MHz, below 75% of 1410 MHz" in report.unstable_reason
    assert report.data["temperature_before_c"] == 40
    assert report.data["temperature_after_c"] == 87


def test_a_power_cap_that_only_trims_the_clock_keeps_the_result() -> None:
    # What large matmuls typically show: sw_power_cap set, the SM clock a few percent below its limit.
    def power_cap(fake: FakeNvml) -> None:
        fake.reasons = SW_POWER_CAP
        fake.clocks[("sm", "current")] = 1875

    fake = FakeNvml()
    fake.clocks[("sm", "applications")] = fake.clocks[("sm", "default_applications")] = 1980
    # No background poll in between: only start's and stop's readings, so the counts are exact.
    report = run_monitor(fake, during=power_cap, poll_interval_s=3600)
    assert report.unstable_reason is None
    assert any(
        n.startswith("sw_power_cap (1/2 polls): the SM clock stayed at 1875 MHz or more (95% of 1980 MHz")
        for n in [x.text for x in report.notes]
    ), report.notes


def test_a_power_cap_with_unreadable_clocks_is_unstable() -> None:
    def power_cap(fake: FakeNvml) -> None:
        fake.reasons = SW_POWER_CAP
        fake.unsupported = frozenset({"clock_mhz:current"})

    report = run_monitor(FakeNvml(), during=power_cap)
    assert report.unstable_reason is not None
    assert "SM clock unreadable" in report.unstable_reason


def test_steady_locked_clocks_are_healthy_and_quiet() -> None:
    report = run_monitor(locked_fake(reasons=APPLICATIONS_CLOCKS_SETTING))
    assert report.unstable_reason is None
    assert report.notes == ()
    assert report.data["clocks_locked"] == "yes"
    assert report.data["sm_clock_min_mhz"] == report.data["sm_clock_max_mhz"] == 1980


def test_idle_and_app_clock_limits_are_not_slowdowns() -> None:
    report = run_monitor(locked_fake(reasons=GPU_IDLE | APPLICATIONS_CLOCKS_SETTING))
    assert report.unstable_reason is None


def test_unlocked_clocks_give_a_warning_note() -> None:
    report = run_monitor(FakeNvml())
    assert report.unstable_reason is None
    assert report.data["clocks_locked"] == "no"
    assert len(report.notes) == 1
    assert "do not look locked" in report.notes[0].text
    assert "nvidia-smi -lgc" in report.notes[0].text


def test_clock_drift_during_the_measurement_is_noted() -> None:
    def drop_clock(fake: FakeNvml) -> None:
        fake.clocks[("sm", "current")] = 1500

    report = run_monitor(FakeNvml(), during=drop_clock)
    assert report.data["sm_clock_min_mhz"] == 1500
    assert report.data["sm_clock_max_mhz"] == 1980
    assert any("varied between 1500 and 1980 MHz" in n for n in [x.text for x in report.notes])


def test_clock_drop_while_idle_is_not_drift() -> None:
    def go_idle(fake: FakeNvml) -> None:
        fake.reasons = GPU_IDLE
        fake.clocks[("sm", "current")] = 210

    report = run_monitor(locked_fake(), during=go_idle)
    assert report.data["sm_clock_min_mhz"] == 1980
    assert report.notes == ()


def test_unreadable_reasons_are_a_note() -> None:
    report = run_monitor(FakeNvml(unsupported=frozenset({"clock_event_reasons"})))
    assert report.unstable_reason is None
    assert "clock-event reasons unavailable: Not Supported" in [x.text for x in report.notes]
    assert report.data["clocks_locked"] == "unknown"


def test_the_background_thread_polls_and_nvml_is_shut_down() -> None:
    fake = locked_fake()
    monitor = HealthMonitor(0, nvml=fake, poll_interval_s=FAST)
    monitor.start()
    deadline = time.monotonic() + 10
    while fake.reason_reads < 5 and time.monotonic() < deadline:
        time.sleep(0.005)
    report = monitor.stop()
    assert fake.reason_reads >= 5
    assert report.data["nvml_polls"] == fake.reason_reads
    assert fake.initialized == 0
    assert monitor.stop() is report  # stopping twice returns the same report


def test_a_monitor_can_be_restarted() -> None:
    fake = locked_fake(reasons=HW_THERMAL_SLOWDOWN)
    monitor = HealthMonitor(0, nvml=fake, poll_interval_s=FAST)
    monitor.start()
    assert monitor.stop().unstable_reason is not None
    fake.reasons = 0
    monitor.start()
    assert monitor.stop().unstable_reason is None


# --- the pynvml adapter, against a stand-in module ------------------------------------------------


class FakeNVMLError(Exception):
    pass


def fake_pynvml(*, with_event_api: bool) -> types.ModuleType:
    module = types.ModuleType("pynvml")
    calls: list[str] = []

    def record(name: str, value: Any) -> Any:
        def fn(*args: Any) -> Any:
            calls.append(name)
            if isinstance(value, Exception):
                raise value
            return value

        fn.__name__ = name  # as pynvml's own functions are named
        return fn

    module.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
    module.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    module.NVML_CLOCK_MEM = 2  # type: ignore[attr-defined]
    module.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    module.NVML_FEATURE_ENABLED = 1  # type: ignore[attr-defined]
    module.calls = calls  # type: ignore[attr-defined]
    for name, value in {
        "nvmlInit": None,
        "nvmlShutdown": None,
        "nvmlDeviceGetHandleByIndex": "handle0",
        "nvmlDeviceGetHandleByUUID": FakeNVMLError("Not Found"),
        "nvmlSystemGetDriverVersion": "560.35.03",
        "nvmlSystemGetCudaDriverVersion": 12060,
        "nvmlDeviceGetName": "NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetUUID": "GPU-1234",
        "nvmlDeviceGetClockInfo": 1980,
        "nvmlDeviceGetMaxClockInfo": 1980,
        "nvmlDeviceGetApplicationsClock": 1755,
        "nvmlDeviceGetDefaultApplicationsClock": 1755,
        "nvmlDeviceGetPowerManagementLimit": 700000,
        "nvmlDeviceGetTemperature": 35,
        "nvmlDeviceGetPersistenceMode": 1,
        "nvmlDeviceGetCurrentClocksThrottleReasons": SW_POWER_CAP,
    }.items():
        setattr(module, name, record(name, value))
    if with_event_api:
        module.nvmlDeviceGetCurrentClocksEventReasons = record(  # type: ignore[attr-defined]
            "nvmlDeviceGetCurrentClocksEventReasons", HW_THERMAL_SLOWDOWN
        )
    return module


@pytest.mark.parametrize(("with_event_api", "expected"), [(True, HW_THERMAL_SLOWDOWN), (False, SW_POWER_CAP)])
def test_backend_prefers_the_clock_event_api(
    monkeypatch: pytest.MonkeyPatch, with_event_api: bool, expected: int
) -> None:
    module = fake_pynvml(with_event_api=with_event_api)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    assert PynvmlBackend().clock_event_reasons("handle0") == expected


def test_backend_probe_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    module = fake_pynvml(with_event_api=True)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    result = probe_device(0)
    assert result["name"] == "NVIDIA H100 80GB HBM3"
    assert result["driver"] == "560.35.03"
    assert result["cuda_driver_version"] == "12.6"
    assert result["persistence_mode"] == "on"
    assert result["clock_event_reasons"] == "hw_thermal_slowdown"
    assert module.calls[0] == "nvmlInit"
    assert module.calls[-1] == "nvmlShutdown"


def test_backend_turns_nvml_errors_into_query_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    module = fake_pynvml(with_event_api=True)

    def nvmlDeviceGetPowerManagementLimit(handle: object) -> int:
        raise FakeNVMLError("Not Supported")

    module.nvmlDeviceGetPowerManagementLimit = nvmlDeviceGetPowerManagementLimit  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", module)
    with pytest.raises(NvmlQueryError, match="Not Supported") as info:
        PynvmlBackend().power_limit_mw("handle0")
    assert info.value.query == "nvmlDeviceGetPowerManagementLimit"  # the query at fault
    assert "power_limit_w" not in probe_device(0)


def test_the_fake_names_the_query_it_cannot_answer() -> None:
    with pytest.raises(NvmlQueryError, match="Not Supported") as info:
        FakeNvml(unsupported=frozenset({"temperature_c"})).temperature_c(None)
    assert info.value.query == "temperature_c"
    with pytest.raises(NvmlQueryError, match="no driver") as info:
        FakeNvml(init_error="no driver").init()
    assert info.value.query == "init"


def test_backend_keeps_one_nvml_reference_for_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    module = fake_pynvml(with_event_api=True)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    probe_device(0)
    probe_device(0)
    # Two probes, two init/shutdown pairs, plus one init held until exit.
    assert module.calls.count("nvmlInit") == 3
    assert module.calls.count("nvmlShutdown") == 2
