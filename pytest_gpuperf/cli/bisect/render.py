"""The bisect's output: a line per step, the summary with the evidence, and the JSON for machines.

Commit subjects, test ids and a skipped step's pytest output are text from the repository: every line
for a terminal goes through ``report.text.plain`` as test ids do (no colours, window titles or clipboard
writes from a commit message); the JSON keeps them as they are, escaped by JSON itself.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from pytest_gpuperf.cli.bisect.model import Finding, Outcome, Status, Step, StepVerdict
from pytest_gpuperf.report.text import plain

JSON_FORMAT = "gpuperf-bisect"
JSON_VERSION = 1


def finding_text(f: Finding) -> str:
    from pytest_gpuperf.report.units import format_change, format_value

    ci = ""
    if f.ci_low is not None and f.ci_high is not None:
        ci = f", 95% CI {format_change(f.ci_low - 1)} to {format_change(f.ci_high - 1)}"
    p = f", p={f.p_value:.2g}" if f.p_value is not None else ""
    before = format_value(f.reference, f.unit) if f.reference is not None else "-"
    return f"{f.key} {f.metric}: {before} -> {format_value(f.current, f.unit)} ({format_change(f.change)}{ci}{p})"


def measuring_line(number: int, commit: str, subject: str) -> str:
    """``step 2: measuring 0fc533543362 [half-finished refactor] ...``: a step takes minutes, say which commit."""
    return plain(f"step {number}: measuring {commit[:12]} [{subject}] ...")


def step_line(number: int, step: Step, bad: str) -> str:
    label = " (BAD)" if step.commit == bad else ""
    head = f"step {number}: {step.commit[:12]}{label} {step.verdict.value:<4}"
    if step.verdict is StepVerdict.SKIP:
        detail = f"skipped: {step.reason}"
    elif step.verdict is StepVerdict.INCONCLUSIVE:
        detail = f"{step.reason}: {finding_text(step.findings[0])}" if step.findings else step.reason
    elif step.findings:
        detail = finding_text(step.findings[0])
        if len(step.findings) > 1:
            detail += f" (and {len(step.findings) - 1} more)"
    else:
        detail = "no time comparison"
    return plain(f"{head}  {detail}  [{step.subject}]")


def render(outcome: Outcome) -> str:
    """The summary after the steps: the first bad commit with its evidence, or why there is none (inert text)."""
    return plain(_summary(outcome), keep_newlines=True)


def _summary(outcome: Outcome) -> str:
    bad = outcome.bad[:12]
    if outcome.status is Status.BAD_NOT_SLOWER:
        return (
            f"BAD {bad} is not slower than GOOD {outcome.good[:12]}: no selected measurement regressed, so "
            "there is no first bad commit to find (a wider selection or a lower threshold may show one)\n"
        )
    if outcome.status is Status.BAD_UNTESTABLE:
        step = outcome.step_of(outcome.bad)
        reason = step.reason if step else "?"
        return f"BAD {bad} could not be measured or judged, so the slowdown is not reproduced: {reason}\n"
    if outcome.status is Status.RANGE:
        lines = [f"the first bad commit is one of these {len(outcome.suspects)} (skipped or inconclusive commits "
                 "hide which):"]  # fmt: skip
        for commit in outcome.suspects:
            step = outcome.step_of(commit)
            state = step.verdict.value if step else "untested"
            lines.append(f"  {commit} {state:<12} {outcome.subjects.get(commit, '')}")
        if any((s := outcome.step_of(c)) and s.verdict is StepVerdict.INCONCLUSIVE for c in outcome.suspects):
            lines.append("an inconclusive commit was measured twice without a significant answer: give each step "
                         "more time (--gpuperf-max-time, --gpuperf-confirm-pairs after --) to decide it")  # fmt: skip
        return "\n".join(lines) + "\n"
    first = outcome.suspects[0]
    step = outcome.step_of(first)
    lines = [f"first bad commit: {first} {outcome.subjects.get(first, '')}"]
    for f in step.findings if step else ():
        lines.append(f"  {finding_text(f)}")
        if f.evidence:
            lines.append(f"    evidence: {f.evidence}")
    return "\n".join(lines) + "\n"


def to_json(outcome: Outcome) -> str:
    document = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "good": outcome.good,
        "bad": outcome.bad,
        "status": outcome.status.value,
        "first_bad": outcome.first_bad,
        "suspects": list(outcome.suspects),
        "candidates": [{"commit": c, "subject": outcome.subjects.get(c, "")} for c in outcome.candidates],
        "steps": [{**asdict(s), "verdict": s.verdict.value} for s in outcome.steps],
    }
    return json.dumps(document, indent=2, allow_nan=False) + "\n"
