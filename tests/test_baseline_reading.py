"""What a baseline is written from: the session's reading checked by fresh-process readings.

The fresh-process readings themselves are taken by a real worker in
tests/test_fresh_remeasure.py; here they are given, to pin down the choice.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from pytest_gpuperf import stats
from pytest_gpuperf.baseline.store import BaselineStore
from pytest_gpuperf.config import BusyPolicy, GateSettings, GpuperfConfig, MeasureSettings, Mode, resolve
from pytest_gpuperf.engines.local import LocalEngine
from pytest_gpuperf.measure.host.cpu import CpuHostGuard
from pytest_gpuperf.measure.runner import MeasureSpec, Runner, RunnerOptions
from pytest_gpuperf.model import Measurement
from pytest_gpuperf.modes import plan_for
from pytest_gpuperf.verdict.rulesets import rules_for
from tests.verdict_helpers import ENV, measurement, rounds

KEY = "t.py::test_a::default"
SESSION_REFERENCE = {"interpreter.1": 18_000.0, "vector.1": 8_000.0, "memory.1": 300_000.0}
FRESH_REFERENCE = {"interpreter.1": 18_500.0, "vector.1": 8_100.0, "memory.1": 310_000.0}
CONFIG = GpuperfConfig(enabled=True, update_baseline=True)
SETTINGS = resolve(CONFIG)


class ScriptedReadings:
    """Stands in for the fresh worker process (tests/test_fresh_remeasure.py runs the real one)."""

    def __init__(self, given: list[Measurement], *, writes: bool = True) -> None:
        self.given = given
        self.writes = writes  # readings of a baseline write; else a gate's re-measures, each a full reading
        self.taken = 0

    def measure(
        self, test_id: str, key: str, settings: MeasureSettings, *,
        new_process: bool = False, check_samples: int | None = None, peak_memory: bool = True,
    ) -> Measurement:  # fmt: skip
        assert key == KEY
        assert new_process == (self.taken >= 1)  # readings after the second do not share its process
        if self.writes:
            assert (check_samples is not None) == (self.taken == 0)  # only the first fresh one is a check
            assert not peak_memory  # the entry's peak memory is the session reading's
        else:
            assert check_samples is None and peak_memory  # a re-measure is judged as the session's reading was
        self.taken += 1
        return self.given.pop(0)

    def close(self) -> None:
        pass


def cpu_engine(tmp_path: Path, fresh: ScriptedReadings | None = None) -> LocalEngine:
    # no wait for a quiet window (busy_policy=retake reads this machine's /proc): the readings are given here
    plan = plan_for(Mode.UPDATE)
    guard = CpuHostGuard(torch.device("cpu"), plan=plan, pin_cpu="off", busy_policy=BusyPolicy.UNSTABLE)
    runner = Runner(RunnerOptions(device=torch.device("cpu"), guard=guard))
    return LocalEngine(runner, BaselineStore(tmp_path), ENV, guard, rules_for(plan, guard.rules(plan)),
                       (lambda: fresh) if fresh is not None else None)  # fmt: skip


def engine_with_fresh_readings(tmp_path: Path, *fresh: Measurement) -> tuple[LocalEngine, list[Measurement]]:
    given = list(fresh)
    engine = cpu_engine(tmp_path, ScriptedReadings(given))
    engine._specs[KEY] = (MeasureSpec(fn=lambda: None, test_id="t.py::test_a"), SETTINGS)
    return engine, given


def test_a_reading_its_check_agrees_with_is_kept(tmp_path: Path) -> None:
    here = measurement(1000.0, reference_ns=SESSION_REFERENCE)
    engine, left = engine_with_fresh_readings(tmp_path, measurement(1040.0, reference_ns=FRESH_REFERENCE))
    kept = engine._baseline_reading(here, GateSettings(threshold=0.10))
    assert not left  # one check: +4% is within half the threshold
    assert kept.samples_ns == here.samples_ns
    assert kept.reference_ns == SESSION_REFERENCE  # the reference measured beside the reading written
    assert (
        "baseline checked by 1 independent measurement(s)" in kept.notes[-1].text
        and "they agree" in kept.notes[-1].text
    )
    assert "quieter machine" not in kept.notes[-1].text  # +4% between processes: 10% stands
    assert kept.process_medians_ns == pytest.approx((1000.0, 1040.0), rel=0.02)


def test_a_reading_its_check_disagrees_with_is_decided_by_a_third(tmp_path: Path) -> None:
    slow_moment = measurement(1600.0, reference_ns=SESSION_REFERENCE, peak_allocated_bytes=4096)
    engine, left = engine_with_fresh_readings(
        tmp_path, measurement(1000.0, reference_ns={}), measurement(1020.0, reference_ns=FRESH_REFERENCE)
    )
    kept = engine._baseline_reading(slow_moment, GateSettings(threshold=0.10))
    assert not left
    assert kept.stats.median_ns == pytest.approx(1020.0, rel=0.02)  # the median of 1000, 1020 and 1600
    assert kept.peak_allocated_bytes == 4096  # taken once, by the session's reading
    assert kept.reference_ns == FRESH_REFERENCE  # the written reading's own
    assert "median of the three is kept" in kept.notes[-1].text
    assert "quieter machine" not in kept.notes[-1].text  # one slow reading of three does not set the noise
    assert kept.process_medians_ns == pytest.approx((1600.0, 1000.0, 1020.0), rel=0.02)  # for the entry's noise


def test_a_check_too_short_to_be_gated_is_never_the_reading_written(tmp_path: Path) -> None:
    # the check (3 samples, readings.check_samples) is the median of the three: the full reading
    # nearest to it is written, with all three medians for the entry's noise
    check = measurement(1052.0, samples_ns=(1051.0, 1052.0, 1053.0), round_medians_ns=(1051.0, 1052.0, 1053.0))
    engine, left = engine_with_fresh_readings(tmp_path, check, measurement(1060.0))
    kept = engine._baseline_reading(measurement(1000.0), GateSettings(threshold=0.10))
    assert not left  # +5.2% between the first two: a third decides, and the three settle it
    assert kept.stats.median_ns == pytest.approx(1060.0, rel=0.01) and kept.stats.count >= 6
    assert kept.process_medians_ns == pytest.approx((1000.0, 1052.0, 1060.0), rel=0.01)


def test_a_measurement_recorded_by_hand_is_written_as_it_is(tmp_path: Path) -> None:
    engine, _ = engine_with_fresh_readings(tmp_path)
    recorded = measurement(1000.0, test_id="t.py::test_ddp")
    assert engine._baseline_reading(recorded, GateSettings(threshold=0.10)) is recorded


def test_readings_that_disagree_widely_ask_for_the_entry_to_be_written_again(tmp_path: Path) -> None:
    # a noisy machine: 1000, 1300, 1600, 1150 and 1450 ns in five processes; the entry's
    # recorded noise (stats.recorded_noise) would make every later gate need a change of about 70%
    engine, left = engine_with_fresh_readings(
        tmp_path, measurement(1300.0), measurement(1600.0), measurement(1150.0), measurement(1450.0)
    )
    kept = engine._baseline_reading(measurement(1000.0), GateSettings(threshold=0.10))
    assert not left  # three readings were too noisy: two more were taken, and no more than that
    note = kept.notes[-1].text
    assert "baseline checked by 4 independent measurement(s)" in note and "the median of the five is kept" in note
    assert kept.stats.median_ns == pytest.approx(1300.0, rel=0.02)
    assert "their spread will raise this entry's threshold from 10.0% to at least" in note, note
    assert "write it again on a quieter machine" in note
    raised = float(note.split("to at least ")[1].split("%")[0]) / 100
    expected = 3.0 * stats.recorded_noise(kept.round_medians_ns, kept.process_medians_ns)  # type: ignore[operator]
    assert raised == pytest.approx(expected, abs=0.001) and raised > 0.4


def test_more_readings_settle_a_spread_that_three_could_not(tmp_path: Path) -> None:
    # 1000, 1100 and 1200 ns would record about 19% of noise (a 58% threshold); two more
    # readings at 1090 and 1110 ns show 1000 and 1200 were the odd ones out
    engine, left = engine_with_fresh_readings(
        tmp_path, measurement(1100.0), measurement(1200.0), measurement(1090.0), measurement(1110.0)
    )
    kept = engine._baseline_reading(measurement(1000.0), GateSettings(threshold=0.10))
    assert not left
    assert kept.stats.median_ns == pytest.approx(1100.0, rel=0.02)
    assert "the median of the five is kept" in kept.notes[-1].text
    assert "quieter machine" not in kept.notes[-1].text
    noise = stats.recorded_noise(kept.round_medians_ns, kept.process_medians_ns)
    assert noise is not None and 3.0 * noise < 0.15


def test_noisy_rounds_of_agreeing_readings_take_no_more_readings(tmp_path: Path) -> None:
    # the two readings agree (+1%), but the session's reading spread 12% between its own rounds:
    # the entry's threshold is raised by that, which more processes would not change
    here = measurement(1000.0, round_medians_ns=rounds(1000.0, 0.12, 3))
    engine, left = engine_with_fresh_readings(tmp_path, measurement(1010.0))
    kept = engine._baseline_reading(here, GateSettings(threshold=0.10))
    assert not left
    assert "baseline checked by 1 independent measurement(s)" in kept.notes[-1].text
    assert "write it again on a quieter machine" in kept.notes[-1].text  # the rounds' noise is still reported


def test_the_stored_profile_makes_no_unprofiled_call_where_the_session_just_measured_the_test(tmp_path: Path) -> None:
    made: list[int] = []
    engine, _ = engine_with_fresh_readings(tmp_path, measurement(404e6))
    spec, settings = engine._specs[KEY]
    one = torch.ones(1)
    # a call that runs a torch operator: profiled by operator (a plain-Python one is by function, capture.py)
    engine._specs[KEY] = (dataclasses.replace(spec, fn=lambda: (made.append(1), one + 1)), settings)
    here = measurement(400e6)  # the session's reading: 0.4 s a call
    kept = engine._baseline_reading(here, GateSettings(threshold=0.10))
    assert kept.op_profile is not None and kept.op_profile.profiled_calls == 2  # the calls that fit in 1 s
    assert len(made) == 3  # the profiler's warm-up #0 and those two; the session's reading warmed the process
