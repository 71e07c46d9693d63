"""One plan per mode (modes.py): every mode-dependent choice asked of it, the mode typed end to end."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from pytest_gpuperf.config import GpuperfConfig, resolve
from pytest_gpuperf.errors import ResultsError, RunError
from pytest_gpuperf.model import Verdict
from pytest_gpuperf.modes import EngineKind, Mode, ModePlan, plan_for
from pytest_gpuperf.verdict.confirmation import by_remeasures, time_of
from tests.verdict_helpers import entry, judged, measurement

PACKAGE = Path(__file__).parent.parent / "pytest_gpuperf"
# The plan decides; the session header renders the mode's word and what each mode compares with.
MAY_COMPARE_MODES = {"modes.py", "report/header.py"}


def _is_mode_member(node: ast.expr) -> bool:
    """``Mode.UPDATE``, ``cfg.Mode.UPDATE``, or a tuple/list/set holding one."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_mode_member(e) for e in node.elts)
    if not isinstance(node, ast.Attribute):
        return False
    owner = node.value
    return (isinstance(owner, ast.Name) and owner.id == "Mode") or (
        isinstance(owner, ast.Attribute) and owner.attr == "Mode"
    )


def _is_mode_value(node: ast.expr) -> bool:
    """A name or attribute called ``mode`` (``mode``, ``session.mode``, ``settings.mode``)."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return name == "mode"


def mode_comparisons(source: str) -> list[int]:
    """The lines of ``source`` that compare modes: a comparison with a ``Mode`` member, a comparison of a value
    named ``mode`` with anything but None, or a ``match`` case on a ``Mode`` member."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            none = any(isinstance(o, ast.Constant) and o.value is None for o in operands)
            if any(_is_mode_member(o) for o in operands) or (not none and any(_is_mode_value(o) for o in operands)):
                lines.append(node.lineno)
        elif isinstance(node, ast.MatchValue) and _is_mode_member(node.value):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_module_compares_modes_outside_the_plan_and_the_header_that_renders_them() -> None:
    found = {
        f"{path.relative_to(PACKAGE).as_posix()}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() not in MAY_COMPARE_MODES
        for line in mode_comparisons(path.read_text())
    }
    assert not found, f"ask the mode's plan (pytest_gpuperf/modes.py) instead of comparing modes: {sorted(found)}"


def test_the_scan_finds_each_way_of_comparing_modes_and_passes_the_rest() -> None:
    source = """
if settings.mode is Mode.UPDATE: pass
if mode in (cfg.Mode.BASELINE, cfg.Mode.SMOKE): pass
if session.mode != "baseline": pass
match mode:
    case Mode.SMOKE: pass
if mode is None: pass
if plan.writes_baselines: pass
if modes == 3: pass
"""
    assert mode_comparisons(source) == [2, 3, 4, 6]


@pytest.mark.parametrize("mode", list(Mode))
def test_every_mode_has_one_plan_and_its_word_finds_it(mode: Mode) -> None:
    plan = plan_for(mode)
    assert plan.mode is mode and plan_for(mode.value) is plan


def test_the_plan_is_the_one_table_row_of_the_configured_mode() -> None:
    assert GpuperfConfig(enabled=True).plan is plan_for(Mode.BASELINE)
    assert GpuperfConfig(enabled=True, compare_ref="main").plan.engine is EngineKind.COMPARE_REF
    settings = resolve(GpuperfConfig(enabled=True, update_baseline=True))
    assert settings.plan is plan_for(Mode.UPDATE) and settings.enabled


def test_each_plan_answers_what_the_modules_used_to_ask_of_the_mode() -> None:
    smoke, baseline, update, ref, files = (plan_for(m) for m in Mode)
    assert [p.measures for p in (smoke, baseline, update, ref, files)] == [False, True, True, True, False]
    assert [p.gates_against_baselines for p in (smoke, baseline, update, ref)] == [False, True, False, False]
    assert update.writes_baselines and not update.confirms_suspicions and not update.profiles_regressions
    assert not update.busy_runner_rule and baseline.busy_runner_rule and files.busy_runner_rule
    assert ref.interleaved and not ref.charts_baseline_history and ref.default_threshold == 0.02
    assert (baseline.default_threshold, files.engine) == (0.10, None)
    assert all(isinstance(p, ModePlan) and p.engine is EngineKind.LOCAL for p in (smoke, baseline, update))


def test_a_results_file_keeps_the_word_and_loads_the_enum(tmp_path: Path) -> None:
    from test_report_helpers import make_session

    from pytest_gpuperf.report.results_json import load_results, write_results

    path = write_results(tmp_path / "r.json", dataclasses.replace(make_session(), mode=Mode.UPDATE))
    assert json.loads(path.read_text())["mode"] == "update"
    assert load_results(path).mode is Mode.UPDATE


def test_a_results_file_with_an_unknown_mode_names_the_field(tmp_path: Path) -> None:
    from test_report_helpers import make_session

    from pytest_gpuperf.report.results_json import load_results, write_results

    path = write_results(tmp_path / "r.json", make_session())
    document = json.loads(path.read_text())
    path.write_text(json.dumps({**document, "mode": "benchmark"}))
    with pytest.raises(ResultsError) as info:
        load_results(path)
    assert info.value.json_path == "$.mode"


def test_a_history_run_holds_the_enum_and_refuses_an_unknown_mode() -> None:
    from pytest_gpuperf.history.model import RunRecord

    fields = dict(run_id="r", commit=None, branch=None, started_at="2026-11-29T00:00:00Z", runner="m",
                  device_class="cpu", environment={}, values=())  # fmt: skip
    assert RunRecord(mode="compare-ref", **fields).mode is Mode.COMPARE_REF  # type: ignore[arg-type]
    with pytest.raises(RunError) as info:
        RunRecord(mode="nightly", **fields)  # type: ignore[arg-type]
    assert info.value.field == "mode"


def test_what_re_measures_make_of_a_suspicion_is_decided_in_the_verdict_package() -> None:
    first = judged(measurement(1500.0), entry(1000.0))
    suspected = time_of(first).verdict
    assert suspected is Verdict.REGRESSION
    cleared = by_remeasures(time_of(first), [judged(measurement(500.0), entry(1000.0))], suspected)
    assert cleared.verdict is Verdict.UNCHANGED  # a reading the other way claims nothing
    step = time_of(cleared).explanation[-1]
    assert step.rule == "confirmation" and "suspected regression not confirmed on re-measure 1" in step.note
    kept = by_remeasures(time_of(first), [judged(measurement(1480.0), entry(1000.0))], suspected)
    assert kept.verdict is Verdict.REGRESSION and "confirmed by 1 re-measure(s)" in time_of(kept).note


def test_the_pairs_verdict_replaces_the_first_pairs_figures_in_the_verdict_package() -> None:
    from pytest_gpuperf.config import GateSettings
    from pytest_gpuperf.verdict import Reference
    from pytest_gpuperf.verdict.confirmation import by_pairs, judge_pairs
    from pytest_gpuperf.verdict.rulesets import rules_for
    from tests.verdict_helpers import ENV

    rules = rules_for(plan_for(Mode.COMPARE_REF))
    first = judged(measurement(1100.0), entry(1000.0), rules=rules)
    reference = Reference(entry=entry(1000.0), base_ref="main")
    pairs = judge_pairs(measurement(1100.0), reference, GateSettings(threshold=0.02), rules,
                        ENV, [1.10, 1.11, 1.09, 1.10, 1.12, 1.10], Verdict.REGRESSION, "six pairs")  # fmt: skip
    result = by_pairs(first, pairs, 2200.0, "confirmed by 6 fresh process pairs")
    time = time_of(result)
    assert time.verdict is pairs.verdict is Verdict.REGRESSION and time.current == 2200.0
    assert time.change == pairs.change and time.baseline == pytest.approx(2200.0 / (1.0 + pairs.change))
    assert time.explanation[-1].rule == "confirmation" and len(time.explanation) > len(time_of(first).explanation)
