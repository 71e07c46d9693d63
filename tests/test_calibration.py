from __future__ import annotations

import torch

from pytest_gpuperf.measure.host.cpu.calibration import CalibrationWorkload


def test_calibration_steps_accumulate_samples() -> None:
    cal = CalibrationWorkload(torch.device("cpu"))
    assert cal.result_ns() is None
    for _ in range(3):
        cal.step()
    assert len(cal.samples_ns) == 3 * cal.samples_per_step
    result = cal.result_ns()
    assert result is not None and result > 0
    # blocks are sized above the wall clock's minimum sample
    assert cal.calls_per_sample * min(cal.samples_ns) > 0


def test_calibration_is_a_fixed_workload() -> None:
    a = CalibrationWorkload(torch.device("cpu"), samples_per_step=1)
    b = CalibrationWorkload(torch.device("cpu"), samples_per_step=1)
    assert torch.equal(a._a, b._a) and torch.equal(a._b, b._b)
