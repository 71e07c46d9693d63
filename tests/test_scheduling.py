"""The time a call would have taken with the CPUs to itself (model/scheduling.py), from constructed accounting."""

from __future__ import annotations

import pytest

from pytest_gpuperf.model import RecordedCorrection, Scheduling, WaitSource
from pytest_gpuperf.model.scheduling import CONTENDED_SHARE, RESIDUE_UNCERTAINTY, correct, uncorrected


def accounting(
    caller_wait: list[float],
    *,
    threads_wait: list[float] | None = None,
    longest: list[float] | None = None,
    threads_cpu: list[float] | None = None,
    cpus: int = 4,
    source: WaitSource = WaitSource.SCHEDSTAT,
    launch: tuple[float, ...] = (),
    switches: tuple[float, ...] = (),
) -> Scheduling:
    n = len(caller_wait)
    waits = threads_wait if threads_wait is not None else caller_wait
    return Scheduling(
        source, tuple(caller_wait), (0.0,) * n, tuple(waits), tuple(threads_cpu or [0.0] * n),
        tuple(longest if longest is not None else caller_wait), cpus=cpus, launch_ns=launch,
        caller_switches=switches,
    )  # fmt: skip


def test_one_thread_s_wait_is_taken_out_exactly() -> None:
    corrected = correct([1000.0, 2000.0], accounting([0.0, 1000.0]))
    assert corrected.samples_ns == (1000.0, 1000.0)  # nothing waited: nothing taken out; else all of the wait
    assert corrected.low_ns == corrected.high_ns == corrected.samples_ns and corrected.uncertainty == 0.0
    assert corrected.source is WaitSource.SCHEDSTAT


def test_the_cost_each_preemption_left_is_fitted_from_the_samples_and_taken_out_too() -> None:
    # 1000 ns of work; every preemption cost a 500 ns wait and 200 ns of refilled caches after it
    switches = tuple(float(i % 3) for i in range(30))
    wall = [1000.0 + 700.0 * k + (i % 5) for i, k in enumerate(switches)]
    corrected = correct(wall, accounting([500.0 * k for k in switches], switches=switches))
    assert max(abs(x - 1000.0) for x in corrected.samples_ns) < 10.0
    preempted = switches.index(2.0)  # 400 ns of residue taken out, known to half of it either way
    assert corrected.high_ns[preempted] - corrected.low_ns[preempted] == pytest.approx(
        2 * RESIDUE_UNCERTAINTY * 400.0, rel=0.05
    )
    # too few samples, or all preempted alike: no fit, only the wait comes out
    same = correct(wall[:5], accounting([500.0 * k for k in switches[:5]], switches=switches[:5]))
    assert same.samples_ns[2] == pytest.approx(wall[2] - 1000.0)


def test_several_threads_bracket_the_call_between_the_longest_wait_and_their_sum() -> None:
    # two threads waited 100 ns and 200 ns: the join lost at least 200 and at most 300
    s = accounting([100.0], threads_wait=[300.0], longest=[200.0])
    corrected = correct([1000.0], s)
    assert corrected.high_ns[0] == pytest.approx(800.0)
    assert corrected.low_ns[0] == pytest.approx(700.0)
    assert corrected.uncertainty > 0


def test_waits_the_process_caused_itself_stay_in_the_time() -> None:
    # three busy threads on two CPUs for 1000 ns: 3000 ns of demand, 2000 ns of room; 1000 ns of the
    # threads' waiting was the process's own and is part of the code's cost
    s = accounting([400.0], threads_wait=[1000.0], longest=[400.0], threads_cpu=[2000.0], cpus=2)
    corrected = correct([1000.0], s)
    assert corrected.high_ns[0] == pytest.approx(1000.0)  # nothing surely came from others
    assert corrected.low_ns[0] == pytest.approx(1000.0)


def test_without_a_wait_counter_the_wait_lies_between_the_off_cpu_time_beyond_the_least_and_all_of_it() -> None:
    s = accounting([50.0, 50.0, 550.0], source=WaitSource.CPU_TIME)  # 50 ns off the CPU in the least of them
    corrected = correct([1000.0, 1000.0, 1500.0], s)
    assert corrected.high_ns == pytest.approx((1000.0, 1000.0, 1000.0))  # the call's own 50 ns kept
    assert corrected.low_ns == pytest.approx((950.0, 950.0, 950.0))  # all of it a wait
    assert corrected.source is WaitSource.CPU_TIME
    # steady contention: every sample waited 500 ns; how much of it the call's own is not known
    steady = correct([1500.0] * 3, accounting([500.0] * 3, source=WaitSource.CPU_TIME))
    assert steady.high_ns[0] == 1500.0 and steady.low_ns[0] == 1000.0 and steady.uncertainty > 0.15


def test_a_device_s_samples_are_corrected_only_where_the_host_kept_it_waiting() -> None:
    # device times 1000 each; the host launched the first in 300 (device-bound) and the second in 1000
    # after waiting 600 (launch-bound): only the second can have been slowed, by up to 600
    s = accounting([600.0, 600.0], launch=(300.0, 1000.0))
    corrected = correct([1000.0, 1000.0], s)
    assert corrected.samples_ns[0] == 1000.0 and corrected.low_ns[0] == corrected.high_ns[0] == 1000.0
    assert corrected.high_ns[1] == 1000.0  # the device's own work in it is unknown: up to all of it
    assert corrected.low_ns[1] == pytest.approx(400.0)


def test_no_accounting_or_one_that_does_not_match_leaves_the_samples_as_they_are() -> None:
    assert correct([1.0, 2.0], None) == uncorrected([1.0, 2.0])
    assert correct([1.0, 2.0], accounting([0.5])).source is None  # misaligned: not used
    assert uncorrected([3.0]).wait_share == 0.0 and not uncorrected([3.0]).contended


def test_the_wait_share_says_whether_a_measurement_was_contended() -> None:
    quiet = correct([1000.0] * 3, accounting([0.0, 0.0, 1.0]))
    busy = correct([2000.0] * 3, accounting([1000.0] * 3))
    assert not quiet.contended and quiet.wait_share < CONTENDED_SHARE
    assert busy.contended and busy.wait_share == pytest.approx(0.5, abs=0.02)


def test_accounting_with_fields_of_different_lengths_is_refused() -> None:
    with pytest.raises(ValueError, match="one value per sample"):
        Scheduling(WaitSource.SCHEDSTAT, (1.0,), (1.0, 2.0), (1.0,), (1.0,), (1.0,))


def test_a_recorded_correction_gives_the_entry_s_side_with_its_recorded_uncertainty() -> None:
    recorded = RecordedCorrection((90.0, 100.0, 110.0), wait_share=0.4, uncertainty=0.02, source=WaitSource.SCHEDSTAT)
    side = recorded.as_corrected()
    assert side.samples_ns == (90.0, 100.0, 110.0) and side.wait_share == 0.4
    assert side.uncertainty == pytest.approx(0.02)
