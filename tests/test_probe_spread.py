"""The speed probe knows its own spread: only a slowdown beyond it is a slow machine, with the evidence."""

from __future__ import annotations

import json

import pytest
import torch
from verdict_helpers import compare, entry, measurement, time_of

from pytest_gpuperf.config import Mode
from pytest_gpuperf.measure.host.cpu import CpuHostGuard
from pytest_gpuperf.measure.host.cpu.speed_probe import SessionSpeedProbe, beyond_spread, is_slow, probe_spread
from pytest_gpuperf.model import Verdict
from pytest_gpuperf.modes import plan_for


def test_the_spread_is_the_slowest_over_the_fastest_reading() -> None:
    assert probe_spread([20_000.0, 26_000.0, None, 21_000.0]) == pytest.approx(1.3)
    assert probe_spread([20_000.0]) is None and probe_spread([]) is None


def test_only_the_slowdown_beyond_the_spread_counts() -> None:
    assert beyond_spread(1.32, 1.35) == 1.0
    assert beyond_spread(1.7, 1.25) == pytest.approx(1.36)
    assert beyond_spread(1.3, None) == 1.3 and beyond_spread(None, 1.2) is None
    assert is_slow(1.32) and not is_slow(1.32, 1.35)  # the fixed ratio alone would call it slow
    assert is_slow(1.32 * 1.35, 1.35)


def test_a_planted_slowdown_on_a_quiet_machine_whose_probe_wanders_is_a_regression() -> None:
    # a quiet host whose probe moved by x1.35 while the baseline was written now reads x1.32
    base = entry(1000.0, speed_probe_ns=30_000.0, speed_probe_spread=1.35)
    c = time_of(compare(measurement(1500.0, speed_probe_ns=39_600.0), base))
    assert c.verdict is Verdict.REGRESSION
    assert "speed probe x1.32 slower now, within its own spread of x1.35 on this host" in c.note
    # the same reading against a baseline that recorded no spread: the fixed ratio alone decides
    unknown = time_of(compare(measurement(1500.0, speed_probe_ns=39_600.0), entry(1000.0, speed_probe_ns=30_000.0)))
    assert unknown.verdict is Verdict.UNSTABLE


def test_a_baseline_probe_slower_within_its_spread_leaves_a_pass_a_pass() -> None:
    base = entry(1000.0, speed_probe_ns=39_600.0, speed_probe_spread=1.35)
    c = time_of(compare(measurement(1000.0, speed_probe_ns=30_000.0), base))
    assert c.verdict is Verdict.UNCHANGED and "within its own spread" in c.note


def test_a_slowdown_beyond_the_spread_is_unstable_and_says_by_how_much() -> None:
    base = entry(1000.0, speed_probe_ns=30_000.0, speed_probe_spread=1.1)
    c = time_of(compare(measurement(1500.0, speed_probe_ns=60_000.0), base))  # x2.00, x1.82 beyond x1.10
    assert c.verdict is Verdict.UNSTABLE
    assert "ran x2.00 slower than when the baseline was written (speed probe; x1.82 beyond its own spread of x1.10" in (
        c.note
    )


def test_the_session_keeps_every_reading_for_the_spread() -> None:
    taken = iter([20_000.0, 24_000.0, 21_000.0])
    probe = SessionSpeedProbe(lambda: next(taken))
    for _ in range(3):
        probe.settled_fastest()
    assert probe.readings == [20_000.0, 24_000.0, 21_000.0]
    guard = CpuHostGuard(torch.device("cpu"), plan=plan_for(Mode.UPDATE), pin_cpu="off")
    guard._session = probe
    assert guard.probe_spread([25_000.0]) == pytest.approx(1.25)  # the fresh processes' readings count too


def test_a_written_baseline_records_the_probes_spread(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_p="def test_noop(gpu_bench):\n    gpu_bench(lambda: sum(range(100)))\n")
    args = ["--gpuperf-warmup-time=0.01", "--gpuperf-min-time=0.03", "--gpuperf-max-time=0.2", "-p", "no:cacheprovider"]
    pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *args).assert_outcomes(passed=1)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    (written,) = json.loads(path.read_text())["entries"].values()
    # a quiet write records the probe's own spread; a busy one records that it was busy instead (its spread is
    # the load's): tests/test_busy_baseline.py pins both down with given readings
    assert written.get("speed_probe_spread", 0.0) >= 1.0 or "written_busy" in written
