"""The kernel's contention counters around a measurement (read from files), the busy-runner rule, the quiet wait."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from verdict_helpers import compare, entry, measurement, samples, time_of

from pytest_gpuperf.config import Mode
from pytest_gpuperf.measure.host.cpu import CpuHostGuard
from pytest_gpuperf.measure.host.cpu.contention import (
    Contention,
    ContentionMonitor,
    ContentionReader,
    QuietWait,
    Sample,
)
from pytest_gpuperf.model import Verdict
from pytest_gpuperf.modes import plan_for
from pytest_gpuperf.verdict.confirmation import suspicion
from pytest_gpuperf.verdict.rulesets import RuleSet, rules_for


def test_pressure_and_steal_are_shares_of_the_interval() -> None:
    before = Sample(wall_s=10.0, pressure_us=1_000_000.0, steal_ticks=50, total_ticks=1000, runnable=1)
    after = Sample(wall_s=12.0, pressure_us=1_600_000.0, steal_ticks=60, total_ticks=1400, runnable=3)
    c = Contention.between(before, after)
    assert c.pressure == pytest.approx(0.3) and c.steal == pytest.approx(0.025) and c.runnable == 3
    assert c.busy
    assert c.describe().startswith("CPU pressure 30% of the time, steal 2.5%, 3 runnable tasks on")


def test_a_quiet_interval_is_not_busy_and_an_unknown_one_is_not_known() -> None:
    quiet = Contention(pressure=0.01, steal=0.0, runnable=1, cpus=2)
    assert quiet.known and not quiet.busy
    assert Contention(pressure=0.0, steal=0.08, runnable=1, cpus=2).busy  # the hypervisor took the time
    unknown = Contention(pressure=None, steal=None, runnable=None, cpus=2)
    assert not unknown.known and unknown.describe() == "no contention signal on this system"
    assert Contention(pressure=None, steal=None, runnable=5, cpus=2).busy  # no PSI: the run queue decides
    assert Contention.from_data(quiet.as_data()) == quiet
    assert Contention.from_data({}) is None


def test_the_monitor_reads_this_machines_counters() -> None:
    monitor = ContentionMonitor()
    monitor.start()
    sum(range(100_000))
    report = monitor.stop()
    assert report.unstable_reason is None  # evidence only: the rules decide
    if report.data:  # a kernel with /proc/stat or PSI
        c = Contention.from_data(report.data)
        assert c is not None and c.known


def loaded_samples() -> tuple[float, ...]:
    """The median and tail slowed 2-4x, the fastest calls not: what the fast-end rule reads as contention."""
    rng = np.random.default_rng(5)
    return tuple(s * (rng.uniform(2, 4) if rng.random() < 0.6 else 1.0) for s in samples(1000.0, seed=1))


QUIET = Contention(pressure=0.0, steal=0.0, runnable=1, cpus=2).as_data()
BUSY = Contention(pressure=0.45, steal=0.0, runnable=6, cpus=2).as_data()


def test_on_a_quiet_runner_the_fast_end_does_not_clear_a_slowdown_as_contention() -> None:
    c = time_of(compare(measurement(samples_ns=loaded_samples(), health=QUIET), entry(samples_ns=samples(1000.0, 2))))
    assert c.verdict is Verdict.REGRESSION
    assert "the runner was quiet while it measured (CPU pressure 0% of the time" in c.note
    assert "fastest" not in c.note  # the samples' shape is not read where the counters answer


def test_on_a_busy_runner_it_is_unstable_with_the_evidence_never_unchanged() -> None:
    c = time_of(compare(measurement(samples_ns=loaded_samples(), health=BUSY), entry(samples_ns=samples(1000.0, 2))))
    assert c.verdict is Verdict.UNSTABLE
    assert "unstable: the runner was busy (CPU pressure 45% of the time, steal 0.0%, 6 runnable tasks on 2 CPUs)" in (
        c.note
    )
    assert [n.rule for n in c.explanation if n.rule == "busy-runner"] == ["busy-runner"]


def test_a_busy_regression_is_unstable_even_when_the_fast_end_moved_and_stays_suspected() -> None:
    """A deterministic 3x slowdown measured busy: unstable (taken again by the confirmation), never a regression."""
    c = time_of(compare(measurement(3000.0, health=BUSY), entry(1000.0)))
    assert c.verdict is Verdict.UNSTABLE and "change is not judged" in c.note
    assert suspicion(c) is Verdict.REGRESSION  # the fresh re-measure judges a quiet reading on its own
    improved = time_of(compare(measurement(400.0, health=BUSY), entry(1000.0)))
    assert improved.verdict is Verdict.UNSTABLE


def test_busy_policy_judge_leaves_the_verdict_to_the_samples() -> None:
    judge = cpu_rules_with("judge")
    c = time_of(compare(measurement(3000.0, health=BUSY), entry(1000.0), rules=judge))
    assert c.verdict is Verdict.REGRESSION and "busy" not in c.note
    guessed = compare(measurement(samples_ns=loaded_samples(), health=BUSY), entry(samples_ns=samples(1000.0, 2)),
                      rules=judge)  # fmt: skip
    assert time_of(guessed).verdict is Verdict.UNCHANGED and "contention on the machine" in time_of(guessed).note
    assert "busy-runner" not in judge.names()["time"] and "busy-runner" in cpu_rules_with("unstable").names()["time"]


def cpu_rules_with(policy: str) -> RuleSet:
    guard = CpuHostGuard(torch.device("cpu"), plan=plan_for(Mode.BASELINE), pin_cpu="off", busy_policy=policy)
    return rules_for(plan_for(Mode.BASELINE), guard.rules(plan_for(Mode.BASELINE)))


def test_without_a_signal_the_fast_end_guesses_as_before() -> None:
    c = time_of(compare(measurement(samples_ns=loaded_samples()), entry(samples_ns=samples(1000.0, 2))))
    assert c.verdict is Verdict.UNCHANGED and "contention on the machine" in c.note


class FakeProc:
    """/proc/pressure/cpu and /proc/stat as files in a tmp folder, advanced by a clock the test owns."""

    def __init__(self, folder: Path) -> None:
        self.pressure, self.stat = folder / "pressure", folder / "stat"
        self.now, self.stall_us, self.ticks, self.steal, self.avg10 = 100.0, 0.0, 10_000, 0, 50.0
        self.write(runnable=1)

    def write(self, runnable: int) -> None:
        self.pressure.write_text(f"some avg10={self.avg10:.2f} avg60=0.00 avg300=0.00 total={self.stall_us:.0f}\n"
                                 "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")  # fmt: skip
        self.stat.write_text(f"cpu  {self.ticks} 0 0 0 0 0 0 {self.steal} 0 0\ncpu0 1 2 3\nprocs_running {runnable}\n")

    def advance(self, seconds: float, pressure: float, runnable: int) -> None:
        """``seconds`` pass with some task stalled ``pressure`` of the time."""
        self.now += seconds
        self.stall_us += pressure * seconds * 1e6
        self.avg10 = 100 * pressure if seconds >= 10 else self.avg10  # PSI's average lags a short window
        self.ticks += int(200 * seconds)
        self.write(runnable)

    def reader(self) -> ContentionReader:
        return ContentionReader(str(self.pressure), str(self.stat), clock=lambda: self.now)


def test_the_reader_takes_the_counters_from_its_files(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    monitor = ContentionMonitor(proc.reader())
    monitor.start()
    proc.advance(2.0, pressure=0.3, runnable=5)
    c = Contention.from_data(monitor.stop().data)
    assert c is not None and c.pressure == pytest.approx(0.3) and c.runnable == 5 and c.busy
    missing = ContentionReader(str(tmp_path / "none"), str(tmp_path / "none"))
    assert missing.sample().pressure_us is None and missing.sample().runnable is None  # another OS: unknown


def quiet_after(proc: FakeProc, busy_windows: int) -> Callable[[float], None]:
    """A sleep during which the runner stays busy for ``busy_windows`` windows, then goes quiet."""
    windows = iter(range(10_000))

    def sleep(seconds: float) -> None:
        busy = next(windows) < busy_windows
        proc.advance(seconds, pressure=0.6 if busy else 0.01, runnable=6 if busy else 1)

    return sleep


def test_the_quiet_wait_returns_once_a_window_reads_quiet(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    wait = QuietWait(proc.reader(), sleep=quiet_after(proc, busy_windows=3), window_s=0.5, first_s=10.0)
    note = wait.wait()
    assert note is not None and note.startswith("waited 2s for the runner to be quiet (CPU pressure 1% of the time")
    assert wait.wait() is None  # quiet at once: nothing to say
    proc.avg10 = 2.0
    proc.write(runnable=1)
    sleeps: list[float] = []
    assert QuietWait(proc.reader(), sleep=sleeps.append).wait() is None and sleeps == []  # PSI's 10 s average: quiet


def test_the_quiet_wait_is_bounded_per_measurement_and_per_session(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    wait = QuietWait(proc.reader(), sleep=quiet_after(proc, busy_windows=1000), window_s=0.5, max_wait_s=2.0,
                     first_s=3.0, share=0.2)  # fmt: skip
    first = wait.wait()
    assert first is not None and first.startswith("the runner stayed busy through 2s of waiting (CPU pressure 60%")
    second = wait.wait()
    # the allowance: 3 s, and a fifth of the time since the first wait (the waiting included)
    assert second is not None and "time for waiting for quiet windows is spent (3.5s): measured busy" in second
    assert wait.wait() is not None and wait.spent_s == pytest.approx(4.0)  # the allowance grew by a window
    fourth = wait.wait()  # spent: no window more
    assert fourth == ("the runner was busy (CPU pressure 50% over the last 10 s) and this session's time for waiting "
                      "for quiet windows is spent") and wait.spent_s == pytest.approx(4.0)  # fmt: skip
    proc.advance(20.0, pressure=0.6, runnable=6)  # 20 s of measuring: a fifth of it more may be waited
    assert wait.allowance_s() == pytest.approx(3.0 + 0.2 * 24.0)


def test_the_guard_waits_only_under_retake(tmp_path: Path) -> None:
    for policy, waits in (("retake", True), ("unstable", False), ("judge", False)):
        (tmp_path / policy).mkdir()
        proc = FakeProc(tmp_path / policy)
        quiet = QuietWait(proc.reader(), sleep=quiet_after(proc, busy_windows=2), window_s=0.5, first_s=10.0)
        guard = CpuHostGuard(
            torch.device("cpu"), plan=plan_for(Mode.BASELINE), pin_cpu="off", busy_policy=policy, quiet=quiet
        )
        probe, note = guard.settle(lambda: 1000.0, 1000.0)
        assert probe == 1000.0 and (note is not None and "waited 1.5s for the runner to be quiet" in note) is waits
