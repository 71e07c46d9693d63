"""A change measured busy with no scheduler accounting (an older or recorded measurement) is taken again in a
fresh process; only a quiet reading is judged."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pytest_gpuperf.baseline.store import BaselineStore
from pytest_gpuperf.config import GpuperfConfig, Mode, resolve
from pytest_gpuperf.engines.local import LocalEngine
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.measure.host.cpu import CpuHostGuard
from pytest_gpuperf.measure.host.cpu.contention import Contention
from pytest_gpuperf.measure.runner import MeasureSpec, Runner, RunnerOptions
from pytest_gpuperf.model import Measurement, Verdict
from pytest_gpuperf.modes import plan_for
from pytest_gpuperf.verdict.confirmation import time_of
from pytest_gpuperf.verdict.rulesets import rules_for
from tests.test_baseline_reading import KEY, ScriptedReadings
from tests.verdict_helpers import ENV, entry, measurement

BUSY = Contention(pressure=0.45, steal=0.0, runnable=6, cpus=2).as_data()
QUIET = Contention(pressure=0.01, steal=0.0, runnable=1, cpus=2).as_data()
GATING = resolve(GpuperfConfig(enabled=True))  # one re-measure by default


def gating_engine(tmp_path: Path, policy: str, *fresh: Measurement) -> LocalEngine:
    guard = CpuHostGuard(torch.device("cpu"), plan=plan_for(Mode.BASELINE), pin_cpu="off", busy_policy=policy)
    store = BaselineStore(tmp_path)
    store.update(ENV.device_class, [entry(1000.0)])
    runner = Runner(RunnerOptions(device=torch.device("cpu"), guard=guard))
    readings = ScriptedReadings(list(fresh), writes=False)
    rules = rules_for(plan_for(Mode.BASELINE), guard.rules(plan_for(Mode.BASELINE)))
    engine = LocalEngine(runner, store, ENV, guard, rules, lambda: readings)
    engine._specs[KEY] = (MeasureSpec(fn=lambda: None, test_id="t.py::test_a"), GATING)
    return engine


def first_reading(health: dict[str, object]) -> Measurement:
    return measurement(1500.0, health=health)  # a real +50% slowdown


def test_a_busy_slowdown_taken_again_quiet_is_judged_on_that_reading(tmp_path: Path) -> None:
    engine = gating_engine(tmp_path, "retake", measurement(1500.0, health=QUIET))
    (result,) = engine.evaluate([first_reading(BUSY)], GATING)
    c = time_of(result)
    assert c.verdict is Verdict.REGRESSION
    assert "confirmed by 1 re-measure(s) in fresh processes" in c.note
    assert "busy" not in c.note  # judged on the quiet reading


def test_a_slowdown_still_measured_busy_is_unstable_with_the_evidence(tmp_path: Path) -> None:
    engine = gating_engine(tmp_path, "retake", measurement(1500.0, health=BUSY))
    (result,) = engine.evaluate([first_reading(BUSY)], GATING)
    c = time_of(result)
    assert c.verdict is Verdict.UNSTABLE
    assert "unstable: the runner was busy (CPU pressure 45% of the time, steal 0.0%, 6 runnable tasks on 2 CPUs)" in (
        c.note
    )
    assert "not judged on re-measure 1" in c.note


def test_busy_policy_judge_judges_the_busy_reading_as_measured(tmp_path: Path) -> None:
    engine = gating_engine(tmp_path, "judge", measurement(1500.0, health=BUSY))
    (result,) = engine.evaluate([first_reading(BUSY)], GATING)
    c = time_of(result)
    assert c.verdict is Verdict.REGRESSION and "busy" not in c.note


def test_an_unknown_policy_is_a_usage_error_naming_where_it_came_from(pytester: pytest.Pytester) -> None:
    with pytest.raises(ConfigError, match="--gpuperf-busy-policy must be one of retake, unstable, judge, got 'maybe'"):
        GpuperfConfig(busy_policy="maybe")
    pytester.makeini("[pytest]\ngpuperf_busy_policy = sometimes\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--gpuperf", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gpuperf_busy_policy (ini) must be one of retake, unstable, judge, got 'sometimes'*"])
