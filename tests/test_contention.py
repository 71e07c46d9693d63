"""The kernel's contention counters around a measurement (read from files) and the busy-runner rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from verdict_helpers import compare, entry, measurement, time_of

from pytest_gpuperf.config import Mode
from pytest_gpuperf.measure.host.cpu import CpuHostGuard
from pytest_gpuperf.measure.host.cpu.contention import (
    Contention,
    ContentionMonitor,
    ContentionReader,
    Sample,
)
from pytest_gpuperf.model import Scheduling, Verdict, WaitSource
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


QUIET = Contention(pressure=0.0, steal=0.0, runnable=1, cpus=2).as_data()
BUSY = Contention(pressure=0.45, steal=0.0, runnable=6, cpus=2).as_data()


def accounted(n: int = 300, wait: float = 0.0) -> Scheduling:
    """Scheduler accounting of ``n`` samples that each waited ``wait`` ns for a CPU."""
    return Scheduling(WaitSource.SCHEDSTAT, (wait,) * n, (0.0,) * n, (wait,) * n, (0.0,) * n, (wait,) * n, cpus=2)


def test_a_busy_change_without_accounting_is_unstable_and_stays_suspected() -> None:
    """A deterministic 3x slowdown measured busy with no scheduler accounting (an older results file)."""
    c = time_of(compare(measurement(3000.0, health=BUSY), entry(1000.0)))
    assert c.verdict is Verdict.UNSTABLE
    assert "unstable: the runner was busy (CPU pressure 45% of the time, steal 0.0%, 6 runnable tasks on 2 CPUs)" in (
        c.note
    )
    assert "no scheduler accounting" in c.note and suspicion(c) is Verdict.REGRESSION
    assert time_of(compare(measurement(400.0, health=BUSY), entry(1000.0))).verdict is Verdict.UNSTABLE


def test_a_busy_change_with_accounting_is_judged_on_its_corrected_times() -> None:
    """The counters read busy, but each sample carries its wait: the busy-runner rule has nothing to say."""
    m = measurement(3000.0, health=BUSY, scheduling=accounted())
    c = time_of(compare(m, entry(1000.0)))
    assert c.verdict is Verdict.REGRESSION and "busy-runner" not in [n.rule for n in c.explanation]


def test_busy_policy_judge_turns_the_rule_off() -> None:
    judge = cpu_rules_with("judge")
    c = time_of(compare(measurement(3000.0, health=BUSY), entry(1000.0), rules=judge))
    assert c.verdict is Verdict.REGRESSION and "busy" not in c.note
    assert "busy-runner" not in judge.names()["time"] and "busy-runner" in cpu_rules_with("unstable").names()["time"]


def cpu_rules_with(policy: str) -> RuleSet:
    guard = CpuHostGuard(torch.device("cpu"), plan=plan_for(Mode.BASELINE), pin_cpu="off", busy_policy=policy)
    return rules_for(plan_for(Mode.BASELINE), guard.rules(plan_for(Mode.BASELINE)))


def test_an_entry_written_busy_without_a_correction_gates_only_a_regression_beyond_it() -> None:
    busy_entry = entry(1000.0, written_busy="CPU pressure 60% of the time")
    unchanged = time_of(compare(measurement(1000.0, scheduling=accounted()), busy_entry))
    assert unchanged.verdict is Verdict.NOT_GATED and "keeps no correction" in unchanged.note
    slower = time_of(compare(measurement(2000.0, scheduling=accounted()), busy_entry))
    assert slower.verdict is Verdict.REGRESSION


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
