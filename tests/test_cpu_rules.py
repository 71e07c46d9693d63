"""The shared CPU's machine-state rule (measure/host/cpu/rules.py): the reference beside the test against the
baseline's, through the real baseline-mode rule lists."""

from __future__ import annotations

import pytest
from verdict_helpers import compare, entry, measurement, rules_that_acted, time_of

from pytest_gpuperf.measure.host.cpu.rules import REFERENCE_NOISE, MachineStateChange
from pytest_gpuperf.model import Metric, Verdict

QUIET = {"interpreter.1": 18_000.0, "vector.1": 8_000.0, "memory.1": 300_000.0}


def slower(**ratios: float) -> dict[str, float]:
    """The quiet reference with some kinds slower (``vector=1.4``)."""
    return {kind: ns * ratios.get(kind.split(".")[0], 1.0) for kind, ns in QUIET.items()}


def test_the_kind_that_moved_most_past_its_noise_is_named() -> None:
    moved = MachineStateChange.between(slower(vector=1.4, memory=1.05), QUIET)
    assert moved is not None and moved.slower == ("vector.1", pytest.approx(1.4)) and moved.faster is None
    back = MachineStateChange.between(QUIET, slower(interpreter=1.3))
    assert back is not None and back.faster == ("interpreter.1", pytest.approx(1.3)) and back.slower is None
    within = MachineStateChange.between(slower(vector=1.0 + REFERENCE_NOISE / 2), QUIET)
    assert within is not None and within.slower is None and within.faster is None
    assert MachineStateChange.between({}, QUIET) is None  # a GPU's, or an older entry: nothing to compare
    assert MachineStateChange.between({"vector.2": 1.0}, {"vector.1": 1.0}) is None  # another version of the work


def test_a_regression_the_machines_state_explains_is_not_judged() -> None:
    # vector work ran x1.40 slower beside the test: up to 1.40 * 1.10 - 1 = +54% is the machine's
    c = time_of(compare(measurement(1450.0, reference_ns=slower(vector=1.4)), entry(1000.0, reference_ns=QUIET)))
    assert c.verdict is Verdict.UNSTABLE and "vector work ran x1.40 slower" in c.note
    assert "can explain up to +54.0%" in c.note and "machine-state" in rules_that_acted(c)


def test_a_regression_larger_than_the_machine_explains_stands() -> None:
    c = time_of(compare(measurement(2000.0, reference_ns=slower(vector=1.4)), entry(1000.0, reference_ns=QUIET)))
    assert c.verdict is Verdict.REGRESSION and "is more than the machine" in c.note


def test_a_pass_against_a_baseline_written_in_a_slower_state_is_not_a_pass() -> None:
    busy_baseline = entry(1000.0, reference_ns=slower(interpreter=1.35))
    c = time_of(compare(measurement(1000.0, reference_ns=QUIET), busy_baseline))
    assert c.verdict is Verdict.UNSTABLE and "write it again" in c.note
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
