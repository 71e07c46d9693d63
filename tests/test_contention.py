"""The kernel's contention counters around a measurement, and the fast-end rule that defers to them."""

from __future__ import annotations

import numpy as np
import pytest
from verdict_helpers import compare, entry, measurement, samples, time_of

from pytest_gpuperf.host.cpu.contention import Contention, ContentionMonitor, Sample
from pytest_gpuperf.model import Verdict


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
    assert "but the runner was quiet while it measured (CPU pressure 0% of the time" in c.note


def test_on_a_busy_runner_it_is_unstable_with_the_evidence_never_unchanged() -> None:
    c = time_of(compare(measurement(samples_ns=loaded_samples(), health=BUSY), entry(samples_ns=samples(1000.0, 2))))
    assert c.verdict is Verdict.UNSTABLE
    assert "unstable: the runner was busy (CPU pressure 45% of the time, steal 0.0%, 6 runnable tasks on 2 CPUs)" in (
        c.note
    )


def test_without_a_signal_the_fast_end_guesses_as_before() -> None:
    c = time_of(compare(measurement(samples_ns=loaded_samples()), entry(samples_ns=samples(1000.0, 2))))
    assert c.verdict is Verdict.UNCHANGED and "contention on the machine" in c.note
