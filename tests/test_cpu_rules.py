"""The shared CPU's machine-state rule (measure/host/cpu/rules.py): the reference beside the test against the
baseline's, through the real baseline-mode rule lists."""

from __future__ import annotations

import pytest
from verdict_helpers import compare, entry, measurement, rules_that_acted, time_of

from pytest_gpuperf.measure.host.cpu.reference import NOISE
from pytest_gpuperf.measure.host.cpu.rules import MachineStateChange
from pytest_gpuperf.model import Metric, Verdict

QUIET = {"interpreter.1": 18_000.0, "vector.1": 8_000.0, "memory.1": 300_000.0}


def slower(**ratios: float) -> dict[str, float]:
    """The quiet reference with some kinds slower (``vector=1.4``)."""
    return {kind: ns * ratios.get(kind.split(".")[0], 1.0) for kind, ns in QUIET.items()}


def test_the_kind_that_moved_most_past_its_own_noise_is_named() -> None:
    # vector work wanders by 25% on its own, interpreter work by 10%: x1.40 and x1.20 are x1.12 and x1.09 beyond
    assert NOISE["vector.1"] == 0.25 and NOISE["interpreter.1"] == 0.10
    moved = MachineStateChange.between(slower(vector=1.4, interpreter=1.2), QUIET)
    assert moved is not None and moved.faster is None and moved.slower is not None
    kind, ratio, beyond = moved.slower
    assert kind == "vector.1" and ratio == pytest.approx(1.4) and beyond == pytest.approx(1.12)
    back = MachineStateChange.between(QUIET, slower(interpreter=1.3, memory=1.4))
    assert back is not None and back.slower is None and back.faster is not None
    # beyond their noise: interpreter x1.18, memory x1.12, vector none; the middle kind decides
    assert back.faster[0] == "memory.1" and back.faster[2] == pytest.approx(1.4 / 1.25)
    one_kind = MachineStateChange.between(QUIET, slower(vector=1.6))  # one kind wandering: not a slower baseline
    assert one_kind is not None and one_kind.faster is None
    within = MachineStateChange.between(slower(vector=1.2, memory=1.2, interpreter=1.05), QUIET)
    assert within is not None and within.slower is None and within.faster is None  # each within its own noise
    assert MachineStateChange.between({}, QUIET) is None  # a GPU's, or an older entry: nothing to compare
    assert MachineStateChange.between({"vector.2": 1.0}, {"vector.1": 1.0}) is None  # another version of the work


def test_a_regression_the_machines_state_explains_is_not_judged() -> None:
    # interpreter work ran x1.40 slower beside the test, x1.27 beyond its 10%: up to 1.27 * 1.10 - 1 = +40% is
    # the machine's
    c = time_of(compare(measurement(1350.0, reference_ns=slower(interpreter=1.4)), entry(1000.0, reference_ns=QUIET)))
    assert c.verdict is Verdict.UNSTABLE and "interpreter work ran x1.40 slower" in c.note
    assert "x1.27 beyond its own spread" in c.note and "can explain up to +40.0%" in c.note
    assert "machine-state" in rules_that_acted(c)


def test_a_regression_larger_than_the_machine_explains_stands() -> None:
    c = time_of(compare(measurement(2000.0, reference_ns=slower(vector=1.4)), entry(1000.0, reference_ns=QUIET)))
    assert c.verdict is Verdict.REGRESSION and "is more than the machine" in c.note
    within_noise = time_of(compare(measurement(1300.0, reference_ns=slower(vector=1.2)),
                                   entry(1000.0, reference_ns=QUIET)))  # fmt: skip
    assert within_noise.verdict is Verdict.REGRESSION and "machine-state" not in rules_that_acted(within_noise)


def test_a_pass_against_a_baseline_written_in_a_slower_state_is_not_a_pass() -> None:
    busy_baseline = entry(1000.0, reference_ns=slower(interpreter=1.35, memory=1.4))
    c = time_of(compare(measurement(1000.0, reference_ns=QUIET), busy_baseline))
    assert c.verdict is Verdict.UNSTABLE and "write it again" in c.note
    assert "(+0.0% could be up to +12.0%)" in c.note  # memory work, the middle kind: x1.40, x1.12 beyond its 25%
    # a baseline written a little slower (x1.29: x1.03 beyond its noise) cannot hide a regression behind +3%
    slightly = entry(1000.0, reference_ns=slower(interpreter=1.29, vector=1.29, memory=1.29))
    near = time_of(compare(measurement(1030.0, reference_ns=QUIET), slightly))
    assert near.verdict is Verdict.UNCHANGED and "machine-state" not in rules_that_acted(near)
    same_state = time_of(compare(measurement(1000.0, reference_ns=QUIET), entry(1000.0, reference_ns=QUIET)))
    assert same_state.verdict is Verdict.UNCHANGED and "machine-state" not in rules_that_acted(same_state)


def test_a_duration_metric_follows_the_machine_too_but_a_count_does_not() -> None:
    compile_s = Metric("first_call_s", 1.5, unit="s", better="lower", tolerance=0.1)
    breaks = Metric("graph_breaks", 3.0, better="lower", absolute_tolerance=0)
    m = measurement(1000.0, reference_ns=slower(interpreter=1.5), metrics=(compile_s, breaks))
    base = entry(1000.0, reference_ns=QUIET, metrics=(Metric("first_call_s", 1.2, unit="s", better="lower"),
                                                       Metric("graph_breaks", 1.0, better="lower")))  # fmt: skip
    by_name = {c.metric: c for c in compare(m, base)}
    assert by_name["metric.first_call_s"].verdict is Verdict.UNSTABLE
    assert by_name["metric.graph_breaks"].verdict is Verdict.REGRESSION
