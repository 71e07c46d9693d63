"""Pinning the measuring thread to one core: which core, when, and that it is undone."""

from __future__ import annotations

import os

import pytest

from pytest_gpuperf.config import GpuperfConfig, Mode
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.measure.host.cpu.pinning import available_cpus, pinned, resolve_pin_cpu
from pytest_gpuperf.modes import plan_for

needs_affinity = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")


@needs_affinity
def test_auto_pins_compare_ref_on_the_cpu_to_the_last_core() -> None:
    cpus = available_cpus()
    expected = max(cpus) if len(cpus) > 1 else None
    assert resolve_pin_cpu("auto", plan=plan_for(Mode.COMPARE_REF), device_type="cpu") == expected


@pytest.mark.parametrize(("mode", "device"), [("baseline", "cpu"), ("update", "cpu"), ("compare-ref", "cuda")])
def test_auto_leaves_other_modes_and_gpus_alone(mode: str, device: str) -> None:
    assert resolve_pin_cpu("auto", plan=plan_for(mode), device_type=device) is None


def test_off_never_pins() -> None:
    assert resolve_pin_cpu("off", plan=plan_for(Mode.COMPARE_REF), device_type="cpu") is None


@needs_affinity
def test_an_explicit_core_is_used_in_any_mode_and_checked() -> None:
    cpu = min(available_cpus())
    assert resolve_pin_cpu(str(cpu), plan=plan_for(Mode.BASELINE), device_type="cuda") == cpu
    with pytest.raises(ConfigError, match=r"--gpuperf-pin-cpu=4096: this process may only run on CPUs"):
        resolve_pin_cpu("4096", plan=plan_for(Mode.BASELINE), device_type="cpu")


@pytest.mark.parametrize("bad", ["last", "-1", "1.5", ""])
def test_bad_settings_name_the_option(bad: str) -> None:
    with pytest.raises(ConfigError, match="--gpuperf-pin-cpu must be auto, off or a CPU number"):
        GpuperfConfig(pin_cpu=bad)


@needs_affinity
def test_pinned_applies_inside_and_restores_after_even_on_error() -> None:
    before = os.sched_getaffinity(0)
    cpu = max(before)
    with pytest.raises(RuntimeError), pinned(cpu):
        assert os.sched_getaffinity(0) == {cpu}
        raise RuntimeError("measured function failed")
    assert os.sched_getaffinity(0) == before
    with pinned(None):
        assert os.sched_getaffinity(0) == before


@needs_affinity
def test_pinned_runs_torch_with_one_intra_op_thread_and_gives_its_count_back() -> None:
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # a pool of two would take turns spinning on the one core
    try:
        with pytest.raises(RuntimeError), pinned(max(os.sched_getaffinity(0))):
            assert torch.get_num_threads() == 1
            raise RuntimeError("measured function failed")
        assert torch.get_num_threads() == 2
        with pinned(None):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
