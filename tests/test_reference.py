"""The machine's reference timed beside a test (measure/host/cpu/reference.py), run for real."""

from __future__ import annotations

import time

import pytest
import torch

from pytest_gpuperf.measure.host import guard_for
from pytest_gpuperf.measure.host.cpu.reference import KINDS, MachineReference
from pytest_gpuperf.measure.runner import MeasureSpec, Runner, RunnerOptions
from pytest_gpuperf.measure.sched import BlockAccounting
from pytest_gpuperf.modes import Mode, plan_for

FAST = dict(warmup_time_s=0.01, min_time_s=0.05, max_time_s=0.2)


def test_each_kind_is_timed_once_a_step_and_its_median_kept() -> None:
    reference = MachineReference()
    assert reference.result() == {}  # before any step
    for _ in range(5):
        reference.step()
    result = reference.result()
    assert set(result) == set(KINDS) and all(ns > 0 for ns in result.values())
    assert all("." in kind for kind in result)  # each kind's name carries its version


def test_a_baseline_mode_measurement_records_it_and_a_compare_ref_one_does_not() -> None:
    from pytest_gpuperf.config import MeasureSettings

    device = torch.device("cpu")
    spec = MeasureSpec(fn=lambda: sum(range(2000)), test_id="t", settings=MeasureSettings(**FAST))
    for mode, expected in ((Mode.BASELINE, True), (Mode.UPDATE, True), (Mode.COMPARE_REF, False)):
        plan = plan_for(mode)
        guard = guard_for(device, plan=plan, pin_cpu="off")
        m = Runner(RunnerOptions(device=device, guard=guard, reference=plan.takes_reference)).measure(spec)
        assert bool(m.reference_ns) is expected, mode
        if expected:
            assert set(m.reference_ns) == set(KINDS)


class Waited(BlockAccounting):
    """The kernel's accounting, with every block charged ``wait_ns`` of run-queue wait on top."""

    def __init__(self, wait_ns: float) -> None:
        super().__init__()
        self.wait_ns = wait_ns

    def after_block(self, block_ns: float) -> None:
        super().after_block(block_ns)
        caller_wait, *rest = self._blocks[-1]
        self._blocks[-1] = (caller_wait + self.wait_ns, *rest)  # type: ignore[assignment]


def test_its_run_queue_wait_is_taken_out() -> None:
    def work() -> None:
        end = time.perf_counter() + 200e-6
        while time.perf_counter() < end:
            pass

    plain = MachineReference({"spin.1": work})
    charged = MachineReference({"spin.1": work}, accounting=Waited(150_000.0))
    for _ in range(5):
        plain.step()
        charged.step()
    # the same work, 150 us of accounted wait per block (of about one call): taken out of the charged one
    (calls,) = charged._calls.values()
    gap = plain.result()["spin.1"] - charged.result()["spin.1"]
    assert gap == pytest.approx(150_000.0 / calls, rel=0.2)
