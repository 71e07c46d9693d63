"""The failure message of a measurement: what failed, the evidence, the rules that decided, and why it got slower."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_gpuperf.model import Comparison, MeasurementResult
from pytest_gpuperf.report.text import plain
from pytest_gpuperf.report.units import format_value
from pytest_gpuperf.report.why import why_lines
from pytest_gpuperf.verdict.judge import failing as failing_comparisons


def explain_lines(c: Comparison, indent: str = "    ") -> list[str]:
    """One line per rule that acted: ``[noise-floor] threshold raised ...  -> unchanged``."""
    return [f"{indent}[{step.rule}] {step.note} -> {step.verdict.value}" for step in c.explanation if step.note]


def failure_message(
    result: MeasurementResult, device: str, only: Sequence[Comparison] = (), *, compare_ref: str | None = None,
    repro: str | None = None,
) -> str:  # fmt: skip
    """One clear message for the failing comparisons of a measurement (``only``: those), with the deciding rules;
    ``compare_ref``: the base ref it was judged against (None: a stored baseline); ``repro``: the command that
    re-runs it (report/repro.py)."""
    key = result.measurement.key
    lines = [f"performance regression in {key}"]
    failing = list(only) or failing_comparisons(result.comparisons, strict=False)
    if not failing:
        failing = failing_comparisons(result.comparisons, strict=True)
        lines[0] = f"{key}: {', '.join(sorted({c.verdict.value for c in failing}))} (--gpuperf-strict)"
    for c in failing:
        change = f" ({c.change:+.1%})" if c.change is not None else ""
        lines.append(f"  {c.metric}: {format_value(c.baseline, c.unit)} -> {format_value(c.current, c.unit)}{change}")
        if c.evidence:
            lines.append(f"    evidence: {c.evidence}")
        if c.threshold is not None:
            lines.append(f"    threshold: {c.threshold:.1%}")
        if c.explanation:
            lines.append("    rules:")
            lines.extend(explain_lines(c, "      "))
    if result.profile_diff is not None:
        lines.extend(f"  {line}" for line in why_lines(result.profile_diff))
    base = result.baseline
    commit = next((c.baseline_commit for c in failing if c.baseline_commit), None)
    if commit is None and base is not None:
        commit = base.provenance.commit
    reference = "baseline" if compare_ref is None else "ref base"
    where = f"  device: {device}"
    if base is not None and base.environment is not None and compare_ref is None:  # compare-ref: the same device
        where += f" (baseline device: {base.environment.device_name})"
    lines.append(where)
    ref = f" ({compare_ref})" if compare_ref is not None else ""
    lines.append(f"  {reference} commit: {commit[:12] if commit else 'unknown'}{ref}")
    if repro is not None:
        lines.append(f"  reproduce: {repro}")
    return "\n".join(plain(line) for line in lines)
