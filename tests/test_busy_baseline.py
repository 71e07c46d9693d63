"""A baseline written while the runner was busy records it, says so when written and whenever it is gated against."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pytest_gpuperf.baseline import codec
from pytest_gpuperf.config import BusyPolicy, GateSettings, Mode
from pytest_gpuperf.measure.host.cpu import CpuHostGuard
from pytest_gpuperf.measure.host.cpu.contention import Contention
from pytest_gpuperf.model import Scheduling, WaitSource
from pytest_gpuperf.modes import plan_for
from pytest_gpuperf.verdict import readings
from tests.test_baseline_reading import engine_with_fresh_readings
from tests.verdict_helpers import entry, measurement

BUSY = Contention(pressure=0.45, steal=0.0, runnable=6, cpus=2).as_data()
QUIET = Contention(pressure=0.01, steal=0.0, runnable=1, cpus=2).as_data()
EVIDENCE = "CPU pressure 45% of the time, steal 0.0%, 6 runnable tasks on 2 CPUs"


def test_the_cpu_guard_names_the_evidence_of_a_busy_runner() -> None:
    guard = CpuHostGuard(torch.device("cpu"), plan=plan_for(Mode.UPDATE), pin_cpu="off")
    assert guard.busy(BUSY) == EVIDENCE
    assert guard.busy(QUIET) is None and guard.busy({}) is None


def test_a_baseline_written_busy_records_it_and_says_it_cannot_be_trusted(tmp_path: Path) -> None:
    here = measurement(1000.0, health=BUSY)  # the session's reading, the one written where the check agrees
    engine, _ = engine_with_fresh_readings(tmp_path, measurement(1010.0, health=QUIET))
    kept = engine._baseline_reading(here, GateSettings(threshold=0.10))
    assert kept.written_busy == EVIDENCE
    assert f"written while the runner was busy ({EVIDENCE}) with no correction for it: write it again" in (
        kept.notes[-1].text
    )
    quiet_engine, _ = engine_with_fresh_readings(tmp_path, measurement(1010.0, health=QUIET))
    quiet = quiet_engine._baseline_reading(measurement(1000.0, health=QUIET), GateSettings(threshold=0.10))
    assert quiet.written_busy is None
    # a busy check beside a quiet reading written: the entry's times were not taken busy, so it gates
    checked_busy, _ = engine_with_fresh_readings(tmp_path, measurement(1010.0, health=BUSY))
    kept_quiet = checked_busy._baseline_reading(measurement(1000.0, health=QUIET), GateSettings(threshold=0.10))
    assert kept_quiet.written_busy is None


def test_a_busy_write_whose_wait_was_accounted_is_corrected_not_busy(tmp_path: Path) -> None:
    """The counters read busy, but each sample carries its run-queue wait: the entry keeps the corrected times."""
    n = 300
    scheduling = Scheduling(WaitSource.SCHEDSTAT, (500.0,) * n, (0.0,) * n, (500.0,) * n, (0.0,) * n, (500.0,) * n)
    here = measurement(1500.0, health=BUSY, scheduling=scheduling)
    check = measurement(1510.0, health=BUSY, scheduling=scheduling)
    engine, left = engine_with_fresh_readings(tmp_path, check)
    kept = engine._baseline_reading(here, GateSettings(threshold=0.10))
    assert kept.written_busy is None and not left  # the check agreed: no deciding reading
    written = next(n.text for n in kept.notes if n.text.startswith("baseline checked"))
    assert "(less their run-queue wait)" in written and "written under contention: 33% of its time" in written
    assert kept.process_medians_ns == pytest.approx((1000.0, 1010.0), rel=0.01)  # the wait taken out exactly


def test_the_record_survives_the_file() -> None:
    busy = entry(1000.0, written_busy=EVIDENCE)
    assert codec.entry_from_json(codec.entry_to_json(busy), path="x", key=busy.key).written_busy == EVIDENCE
    assert "written_busy" not in codec.entry_to_json(entry(1000.0))  # an entry without one keeps its bytes


def test_gating_against_it_says_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_b="def test_noop(gpu_bench):\n    gpu_bench(lambda: sum(range(100)))\n")
    args = ["--gpuperf-warmup-time=0.01", "--gpuperf-min-time=0.03", "--gpuperf-max-time=0.2", "-p", "no:cacheprovider",
            "--gpuperf-threshold=5"]  # fmt: skip
    pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *args).assert_outcomes(passed=1)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    document = json.loads(path.read_text())
    for written in document["entries"].values():
        written["written_busy"] = EVIDENCE
    path.write_text(json.dumps(document))
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-explain", *args)
    result.assert_outcomes(passed=1)
    shortened = "*::default: the baseline was written while the runner was busy (* … *: write it again*"  # notes
    full = f"*note (notice): the baseline was written while the runner was busy ({EVIDENCE}): write it again*"
    result.stdout.fnmatch_lines([shortened, full])  # the second under --gpuperf-explain


def test_a_write_on_a_busy_runner_ends_at_its_check(tmp_path: Path) -> None:
    def noisy(health: dict[str, object]) -> tuple[object, ...]:
        return tuple(measurement(ns, health=health) for ns in (1300.0, 1600.0, 1100.0, 1400.0))

    here = measurement(1000.0, health=BUSY)
    engine, left = engine_with_fresh_readings(tmp_path, *noisy(BUSY))  # type: ignore[arg-type]
    kept = engine._baseline_reading(here, GateSettings(threshold=0.10))
    assert len(left) == 3  # the check alone: no decider, a full measurement of the load's spread
    assert kept.samples_ns == here.samples_ns and kept.written_busy == EVIDENCE
    assert kept.process_medians_ns == pytest.approx((1000.0, 1300.0), rel=0.02)  # the two medians: its noise
    written = next(n.text for n in kept.notes if n.text.startswith("baseline checked"))
    assert f"the session's is kept ({readings.BUSY_WRITE_ENDS})" in written
    assert "raise this entry's threshold" in written  # +30% between them: the entry cannot gate at 10%
    quiet_here = measurement(1000.0, health=QUIET)
    quiet_engine, quiet_left = engine_with_fresh_readings(tmp_path, *noisy(QUIET))  # type: ignore[arg-type]
    quiet_engine._baseline_reading(quiet_here, GateSettings(threshold=0.10))
    assert not quiet_left  # a quiet runner's noisy write takes a decider and its two more
    judging, judging_left = engine_with_fresh_readings(tmp_path, *noisy(BUSY))  # type: ignore[arg-type]
    judging.guard.busy_policy = BusyPolicy.JUDGE  # type: ignore[attr-defined]
    judging._baseline_reading(here, GateSettings(threshold=0.10))
    assert not judging_left  # --gpuperf-busy-policy=judge: the readings decide, busy or not
