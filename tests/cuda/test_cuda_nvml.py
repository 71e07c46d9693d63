"""NVML on a real GPU: the probe names the same GPU torch uses; monitoring never fails a run; the device's state and
energy per call are read beside the samples."""

from __future__ import annotations

import time

import pytest
import torch

from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.gpu.nvml import HealthMonitor, probe_device
from pytest_gpuperf.measure.env import probe_environment
from pytest_gpuperf.measure.runner import MeasureSpec, Runner, RunnerOptions

pytestmark = pytest.mark.cuda


def test_probe_names_the_torch_device(device: torch.device) -> None:
    index = device.index or 0
    result = probe_device(index)
    if "nvml" in result:
        pytest.skip(f"NVML not usable here: {result['nvml']}")
    assert result["name"] == torch.cuda.get_device_name(index)
    assert result["clocks_locked"] in {"yes", "no", "unknown"}


def test_monitor_polls_during_gpu_work(device: torch.device) -> None:
    monitor = HealthMonitor(device.index or 0)
    a = torch.randn(2048, 2048, device=device)
    monitor.start()
    deadline = time.perf_counter() + 0.3
    while time.perf_counter() < deadline:
        a @ a
        torch.cuda.synchronize(device)
    report = monitor.stop()
    if any(n.startswith("NVML unavailable") for n in [x.text for x in report.notes]):
        pytest.skip(report.notes[0].text)
    assert isinstance(report.data["nvml_polls"], int) and report.data["nvml_polls"] >= 2
    assert "temperature_before_c" in report.data


def test_the_environment_records_what_can_move_a_gpus_figures(device: torch.device) -> None:
    env = probe_environment(device)
    assert env.cuda == torch.version.cuda and env.driver
    if torch.backends.cudnn.is_available():
        assert env.extra["cudnn"].count(".") == 2
    if "nvml" not in env.extra:  # NVML usable: the settings that drift compares
        assert {"sm_app_clock_mhz", "power_limit_w", "clocks_locked"} <= set(env.extra)


def test_the_device_state_is_read_beside_every_sample_and_the_energy_per_call_measured(device: torch.device) -> None:
    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    settings = MeasureSettings(warmup_time_s=0.05, min_time_s=0.2, max_time_s=0.5, energy=True)
    m = Runner(RunnerOptions(device=device)).measure(MeasureSpec(fn=lambda: a @ a, test_id="t", settings=settings))
    if m.device_state is None:
        pytest.skip(f"NVML not usable here: {[n.text for n in m.notes]}")
    state = m.device_state
    assert state.samples == len(m.samples_ns) and 1 <= state.readings <= len(m.samples_ns)
    assert state.summary.sm_clock_mhz is not None and state.summary.sm_clock_mhz > 100
    energy = m.metric("energy")
    assert energy is not None and energy.value > 0 and state.energy_source is not None
    # NVML's readings of a GPU running matmuls: it draws some power, at a temperature a GPU runs at
    assert state.power_w and min(state.power_w) > 0 and all(0 <= t <= 120 for t in state.temperature_c)
