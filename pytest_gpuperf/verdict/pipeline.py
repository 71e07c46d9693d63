"""Running an ordered list of rules over a draft comparison."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pytest_gpuperf.model import Comparison, Kind, RuleNote, Verdict
from pytest_gpuperf.verdict.case import Case


@dataclass(frozen=True)
class Step:
    """What a rule did: a new verdict or threshold (None: unchanged), why, and whether the pipeline ends."""

    note: str
    verdict: Verdict | None = None
    threshold: float | None = None
    final: bool = False
    quiet: bool = False  # in the explanation, not in the comparison's short note (a routine finding)
    suspect: bool = False  # the change awaits the mode's confirmation readings (confirmation.py)
    absolute: bool = False  # a violated hard bound: needs no reference, fails in every mode (judge.absolute_failures)


class Rule(Protocol):
    """One named rule of the verdict; ``apply`` returns None when it has nothing to say about ``case``."""

    @property
    def name(self) -> str: ...

    def apply(self, case: Case, draft: Comparison) -> Step | None: ...


def draft_for(case: Case) -> Comparison:
    """The comparison before any rule: the evidence's numbers, verdict unchanged."""
    judged = case.evidence
    ev = judged.shown if judged is not None else None  # the wall clock's, which users read
    baseline_value = _reference_value(case)
    if ev is not None and ev.paired and ev.ratio > 0 and baseline_value is not None:
        # Pooled medians of the two sides can disagree with the paired change (rounds in
        # different machine states); show the reference the change says: current / ratio.
        baseline_value = case.current / ev.ratio
    change = ev.change if ev is not None else _relative_change(case.current, baseline_value)
    return Comparison(
        key=case.key, metric=case.name, verdict=Verdict.UNCHANGED, current=case.current,
        baseline=baseline_value, unit=case.unit, change=change,
        ci_low=ev.low if ev else None, ci_high=ev.high if ev else None, p_value=ev.p_value if ev else None,
        evidence=judged.describe(case.settings.confidence) if judged else "",
        baseline_commit=case.entry.provenance.commit if case.entry is not None else None,
        kind=case.kind, correction=judged.correction if judged else None,
    )  # fmt: skip


def _relative_change(current: float, reference: float | None) -> float | None:
    if reference is None or reference == 0:
        return None
    return (current - reference) / abs(reference)


def _reference_value(case: Case) -> float | None:
    entry = case.entry
    if entry is None:
        return None
    if case.kind is Kind.TIME:
        return entry.stats.get(case.settings.statistic)
    if case.kind is Kind.MEMORY:
        return None if entry.peak_allocated_bytes is None else float(entry.peak_allocated_bytes)
    ref = case.reference_metric
    return None if ref is None else ref.value


def run_pipeline(case: Case, rules: Sequence[Rule], draft: Comparison | None = None) -> Comparison:
    """Apply ``rules`` in order to ``draft`` (by default a fresh one from ``case``)."""
    current = draft if draft is not None else draft_for(case)
    for rule in rules:
        step = rule.apply(case, current)
        if step is None:
            continue
        current = apply_step(current, rule.name, step)
        if step.final:
            break
    return current


def apply_step(draft: Comparison, rule: str, step: Step) -> Comparison:
    """``draft`` after ``step``: its verdict, threshold, note and explanation updated."""
    verdict = step.verdict if step.verdict is not None else draft.verdict
    threshold = step.threshold if step.threshold is not None else draft.threshold
    note = draft.note
    if not step.quiet and step.note:
        note = f"{note}; {step.note}" if note else step.note
    explanation = (*draft.explanation, RuleNote(rule, verdict, step.note, step.suspect, step.absolute))
    return dataclasses.replace(draft, verdict=verdict, threshold=threshold, note=note, explanation=explanation)
