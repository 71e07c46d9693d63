"""The compare-ref engine's own decisions that need no worker: the base's side as a baseline entry."""

from __future__ import annotations

from pathlib import Path

from verdict_helpers import ENV, measurement

from pytest_gpuperf.engines.compare_ref.engine import CompareRefEngine, _BaseSide
from pytest_gpuperf.model import DeviceState, DeviceSummary
from pytest_gpuperf.verdict.rulesets import compare_ref_rules


def test_a_base_side_without_its_own_measurement_keeps_none_of_the_heads_device_state(tmp_path: Path) -> None:
    engine = CompareRefEngine("main", tmp_path, runner=None, environment=ENV, rules=compare_ref_rules())  # type: ignore[arg-type]
    head = measurement(1000.0, device_state=DeviceState(summary=DeviceSummary(sm_clock_mhz=1755.0)))
    base = _BaseSide(head.key, samples=[900.0] * 8, round_medians=[900.0] * 2)  # its samples only, no measurement
    entry = engine._base_entry(head, base)
    assert entry.samples_ns == (900.0,) * 8
    assert entry.device_state is None  # the head's clock is no reading of the base's: sm-clock says nothing
