"""benchmarks/busy_runner.py: what it reads of a results file, and how it sizes its long call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmark_scripts import benchmark_script


@pytest.fixture
def busy() -> Iterator[ModuleType]:
    with benchmark_script("busy_runner") as module:
        yield module


def test_the_time_comparison_is_read_with_its_change_less_the_wait(busy: ModuleType, tmp_path: Path) -> None:
    time_c = {"kind": "time", "verdict": "regression", "change": 0.987,
              "correction": {"change": 0.972, "wait_share": 0.48}}  # fmt: skip
    memory = {"kind": "memory", "verdict": "unchanged", "change": 0.0}
    (tmp_path / "out.json").write_text(json.dumps({"results": [{"comparisons": [memory, time_c]}]}))
    assert busy.time_verdict(tmp_path / "out.json") == "regression, wall +98.7%, less the wait +97.2% (48% waited)"
    time_c.pop("correction")
    (tmp_path / "out.json").write_text(json.dumps({"results": [{"comparisons": [time_c]}]}))
    assert busy.time_verdict(tmp_path / "out.json") == "regression, wall +98.7%"


def test_the_long_call_is_sized_from_the_machines_own_speed(busy: ModuleType) -> None:
    short, longer = busy.steps_for(0.01), busy.steps_for(0.05)
    assert 0 < short < longer
