"""Confirming a suspected regression with more readings, and the failure message that explains the verdict.

The engine takes the readings through its real confirmation path: a recorded
measurement's ``remeasure`` (what the DDP helper hands the fixture) is taken
again, judged on its own against the real baseline store, and the readings plan
(readings.py) decides when to stop.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from pytest_gpuperf.baseline.store import BaselineStore
from pytest_gpuperf.config import GateSettings, GpuperfConfig, Mode, resolve
from pytest_gpuperf.engines.local import LocalEngine
from pytest_gpuperf.measure.host.cpu import CpuHostGuard
from pytest_gpuperf.measure.runner import Runner, RunnerOptions
from pytest_gpuperf.model import Comparison, Measurement, MeasurementResult, Verdict
from pytest_gpuperf.modes import plan_for
from pytest_gpuperf.report.failure import failure_message
from pytest_gpuperf.verdict import fails
from pytest_gpuperf.verdict.rulesets import rules_for
from tests.verdict_helpers import ENV, OTHER, S, entry, judged, measurement, time_of

KEY = "t.py::test_a::default"


class Remeasurer:
    def __init__(self, *medians: float) -> None:
        self.medians = list(medians)
        self.calls = 0

    def __call__(self) -> Measurement:
        self.calls += 1
        return measurement(self.medians.pop(0))


class QuietGuard(CpuHostGuard):
    """The CPU guard without its speed probe: these tests are about readings, not the host's speed."""

    def speed_probe(self) -> float | None:
        return None


def evaluate(first: Measurement, again: Remeasurer, *, remeasures: int = 1, tmp_path: Path) -> MeasurementResult:
    guard = QuietGuard(torch.device("cpu"), plan=plan_for(Mode.BASELINE), pin_cpu="off")
    store = BaselineStore(tmp_path)
    store.update(ENV.device_class, [entry(1000.0)])
    engine = LocalEngine(Runner(RunnerOptions(device=torch.device("cpu"), guard=guard)), store, ENV, guard,
                         rules_for(plan_for(Mode.BASELINE), guard.rules(plan_for(Mode.BASELINE))))  # fmt: skip
    engine.remember(KEY, again)
    settings = resolve(GpuperfConfig(enabled=True, remeasures=remeasures))
    (result,) = engine.evaluate([dataclasses.replace(first, speed_probe_ns=None)], settings)
    return result


def test_confirmed_regression_stays_a_regression(tmp_path: Path) -> None:
    again = Remeasurer(1480.0)
    result = evaluate(measurement(1500.0), again, tmp_path=tmp_path)
    assert again.calls == 1
    assert result.verdict is Verdict.REGRESSION and fails(result, S)
    time = time_of(result.comparisons)
    assert "confirmed by 1 re-measure" in time.note
    assert time.explanation[-1].rule == "confirmation"
    assert result.measurement.stats.median_ns < 1490  # the fresh measurement is reported


def test_unconfirmed_regression_is_dropped(tmp_path: Path) -> None:
    result = evaluate(measurement(1500.0), Remeasurer(1005.0), tmp_path=tmp_path)
    time = time_of(result.comparisons)
    assert result.verdict is Verdict.UNCHANGED and not fails(result, S)
    assert "not confirmed" in time.note and "+50.0%" in time.note


def test_every_remeasure_must_confirm(tmp_path: Path) -> None:
    again = Remeasurer(1500.0, 1000.0, 1500.0)
    result = evaluate(measurement(1500.0), again, remeasures=3, tmp_path=tmp_path)
    assert again.calls == 2 and result.verdict is Verdict.UNCHANGED


def test_no_remeasure_without_suspicion_or_when_disabled(tmp_path: Path) -> None:
    again = Remeasurer(1500.0)
    assert evaluate(measurement(1000.0), again, tmp_path=tmp_path).verdict is Verdict.UNCHANGED
    off = evaluate(measurement(1500.0), again, remeasures=0, tmp_path=tmp_path / "off")
    assert off.verdict is Verdict.REGRESSION and again.calls == 0


def test_strict_fails_not_comparable_unstable_and_not_gated() -> None:
    result = judged(measurement(), entry(env=OTHER))
    assert result.verdict is Verdict.NOT_COMPARABLE
    assert not fails(result, S) and fails(result, GateSettings(strict=True))
    assert "not comparable" in failure_message(result, "cpu")
    one = judged(measurement(samples_ns=(1.0,)), entry())
    assert one.verdict is Verdict.NOT_GATED and fails(one, GateSettings(strict=True)) and not fails(one, S)


def test_failure_message_names_everything_and_the_rules() -> None:
    result = judged(measurement(1500.0), entry(1000.0))
    text = failure_message(result, "cpu")
    assert "t.py::test_a::default" in text
    assert "time.p50: 999.2 ns -> 1.499 us (+50.0%)" in text
    assert "evidence: ratio 1.5" in text and "threshold: 10.0%" in text
    assert "[significance] +50.0% is above the threshold 10.0%" in text and "-> regression" in text
    assert "device: cpu" in text and "baseline commit: abc123" in text
    lines = text.splitlines()  # one fact per line, as pytest shows it
    assert lines[0] == "performance regression in t.py::test_a::default"
    assert "  time.p50: 999.2 ns -> 1.499 us (+50.0%)" in lines and lines[-2].startswith("  device: cpu")


def test_the_failure_message_keeps_its_lines_and_strips_control_characters() -> None:
    result = judged(measurement(1500.0, name="a\x1b[31mred"), entry(1000.0))
    text = failure_message(result, "cpu")
    assert "\x1b" not in text and len(text.splitlines()) > 5


def test_a_suspected_improvement_is_confirmed_like_a_regression(tmp_path: Path) -> None:
    again = Remeasurer(520.0)
    result = evaluate(measurement(500.0), again, tmp_path=tmp_path)
    assert again.calls == 1 and result.verdict is Verdict.IMPROVEMENT
    assert "confirmed by 1 re-measure" in time_of(result.comparisons).note


def test_an_unconfirmed_improvement_is_not_reported_as_one(tmp_path: Path) -> None:
    result = evaluate(measurement(500.0), Remeasurer(1002.0), tmp_path=tmp_path)
    time = time_of(result.comparisons)
    assert result.verdict is Verdict.UNCHANGED
    assert "suspected improvement not confirmed on re-measure 1" in time.note


def test_a_reading_the_other_way_clears_a_suspicion_and_claims_nothing(tmp_path: Path) -> None:
    result = evaluate(measurement(1500.0), Remeasurer(500.0), tmp_path=tmp_path)
    assert result.verdict is Verdict.UNCHANGED
    assert "suspected regression not confirmed" in time_of(result.comparisons).note


def test_suspicion_comes_from_the_steps_flag_not_the_rules_name() -> None:
    from pytest_gpuperf.model import Comparison, Kind, RuleNote
    from pytest_gpuperf.verdict.confirmation import suspicion

    def comparison(*steps: RuleNote) -> Comparison:
        return Comparison(key=KEY, metric="time.p50", verdict=steps[-1].verdict, current=1.0, baseline=1.0,
                          unit="ns", kind=Kind.TIME, explanation=steps)  # fmt: skip

    named = comparison(RuleNote("significance", Verdict.REGRESSION, "called"))
    flagged = comparison(RuleNote("my-rule", Verdict.IMPROVEMENT, "called", suspect=True))
    doubted = comparison(RuleNote("x", Verdict.REGRESSION, "", suspect=True), RuleNote("g", Verdict.UNSTABLE, ""))
    cleared = comparison(RuleNote("x", Verdict.REGRESSION, "", suspect=True), RuleNote("g", Verdict.UNCHANGED, ""))
    assert suspicion(named) is None
    assert suspicion(flagged) is Verdict.IMPROVEMENT
    assert suspicion(doubted) is Verdict.REGRESSION
    assert suspicion(cleared) is None


# Six fresh pairs' ratios of an unchanged test that leaned faster in one session of the detection
# benchmark: -2.1%, its 95% interval [0.962, 0.996].
LEANING_FASTER = [0.991, 0.956, 0.971, 0.973, 0.982, 1.002]


def pairs_verdict(ratios: list[float], suspected: Verdict, errors: tuple[float, ...] = ()) -> Comparison:
    from pytest_gpuperf.verdict import Reference
    from pytest_gpuperf.verdict.confirmation import judge_pairs

    reference = Reference(entry=entry(1000.0), base_ref="main")
    rules = rules_for(plan_for(Mode.COMPARE_REF))
    gate = GateSettings(threshold=0.02)
    return judge_pairs(measurement(1000.0), reference, gate, rules, ENV, ratios, suspected, "pairs", errors)


def test_an_improvement_is_confirmed_at_a_stricter_level_than_a_regression() -> None:
    # at 95% these pairs would credit the head with a 2.1% speed-up; improvements are confirmed at 99.5%
    leaning = pairs_verdict(LEANING_FASTER, Verdict.IMPROVEMENT)
    assert leaning.verdict is Verdict.UNCHANGED, leaning
    assert "a change of the threshold beyond it at most 0.25%, within 50%" in leaning.evidence, leaning.evidence
    # the same pairs the other way round: +2.1%, as likely below the 2% threshold as above it, is not resolved
    slower = pairs_verdict([1 / r for r in LEANING_FASTER], Verdict.REGRESSION)
    assert slower.verdict is Verdict.NOT_RESOLVED, slower
    # a real speed-up is confirmed as before
    faster = pairs_verdict([0.95, 0.948, 0.953, 0.951, 0.949, 0.952], Verdict.IMPROVEMENT)
    assert faster.verdict is Verdict.IMPROVEMENT, faster


def test_pairs_that_lie_beyond_the_threshold_confirm_a_regression_and_within_it_clear_it() -> None:
    beyond = pairs_verdict([1.05, 1.045, 1.055, 1.05, 1.048], Verdict.REGRESSION)
    assert beyond.verdict is Verdict.REGRESSION, beyond
    assert beyond.detectable is not None and beyond.detectable.reading == "fresh pairs"
    within = pairs_verdict([1.004, 0.996, 1.001, 0.999, 1.0], Verdict.REGRESSION)
    assert within.verdict is Verdict.UNCHANGED, within


def test_the_note_says_at_which_level_an_improvement_was_judged_and_what_was_not_resolved() -> None:
    from pytest_gpuperf.verdict.confirmation import pairs_note

    note = pairs_note(Verdict.IMPROVEMENT, Verdict.UNCHANGED, 6, confidence=0.99)
    assert note == (
        "the first pair's suspected improvement was not confirmed at 99% (the level improvements are confirmed "
        "at): 6 fresh pairs ruled it out"
    )
    confirmed = pairs_note(Verdict.REGRESSION, Verdict.REGRESSION, 3, confidence=0.95)
    assert confirmed == "confirmed by 3 fresh process pairs"
    open_note = pairs_note(Verdict.REGRESSION, Verdict.NOT_RESOLVED, 12, confidence=0.95)
    assert "not resolved: 12 fresh process pairs" in open_note


def test_pairs_closer_than_their_own_errors_are_judged_on_those_errors_and_the_evidence_says_so() -> None:
    tight = [0.966, 0.966, 0.970, 0.968, 0.967, 0.969]  # six pairs within 0.4%, each measured to +-2%
    assert pairs_verdict(tight, Verdict.IMPROVEMENT).verdict is Verdict.IMPROVEMENT
    judged = pairs_verdict(tight, Verdict.IMPROVEMENT, (0.01,) * 6)
    assert judged.verdict is Verdict.UNCHANGED  # -3.2%, each pair read to a standard error of 1%: not shown yet
    assert "agreed more closely than each was measured" in judged.evidence, judged.evidence
    assert "1.00%" in judged.evidence


def test_six_pairs_that_leaned_faster_are_not_credited_as_an_improvement() -> None:
    # an unchanged test of the detection benchmark: -2.4%, its 99% interval [0.952, 1.000] excluded 1 by a hair
    leaning = [0.993, 0.968, 0.973, 0.953, 0.988, 0.979]
    judged = pairs_verdict(leaning, Verdict.IMPROVEMENT)
    assert judged.verdict is Verdict.UNCHANGED, judged


def test_without_fresh_pairs_the_first_pairs_own_outcome_stands() -> None:
    from pytest_gpuperf.model import Kind, RuleNote
    from pytest_gpuperf.verdict.confirmation import unconfirmed_verdict

    def screened(before: Verdict, suspected: Verdict = Verdict.REGRESSION) -> Comparison:
        steps = (RuleNote("against-threshold", before, ""), RuleNote("screen", suspected, "", suspect=True))
        return Comparison(key=KEY, metric="time.p50", verdict=suspected, current=1.0, kind=Kind.TIME,
                          explanation=steps)  # fmt: skip

    assert unconfirmed_verdict(screened(Verdict.REGRESSION)) is Verdict.REGRESSION  # beyond the threshold already
    assert unconfirmed_verdict(screened(Verdict.UNCHANGED)) is Verdict.UNCHANGED  # only past half of it
    assert unconfirmed_verdict(screened(Verdict.NOT_RESOLVED)) is Verdict.NOT_RESOLVED
    assert unconfirmed_verdict(screened(Verdict.IMPROVEMENT, Verdict.IMPROVEMENT)) is Verdict.UNCHANGED
