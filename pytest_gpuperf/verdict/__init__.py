"""The verdict: one pipeline of small, named rules that every mode shares.

A comparison (time, memory or a metric of one measurement) starts as a draft
filled from its evidence; each rule of the mode's ordered list may set the
threshold, change the verdict or stop the pipeline, and says why in a note.
The result carries every rule that acted (``Comparison.explanation``), so a
failure message, the results JSON and ``--gpuperf-explain`` can all say why a
verdict is what it is. Baseline mode and compare-ref differ only in their
evidence (``evidence.py``) and their rule lists (``rulesets.py``); the host
guards (``pytest_gpuperf.host``) add the rules that only matter on their host.
"""

from __future__ import annotations

from pytest_gpuperf.verdict.case import Case, Evidence
from pytest_gpuperf.verdict.judge import Reference, fails, judge
from pytest_gpuperf.verdict.pipeline import Rule, Step, run_pipeline
from pytest_gpuperf.verdict.rulesets import RuleSet

__all__ = ["Case", "Evidence", "Reference", "Rule", "RuleSet", "Step", "fails", "judge", "run_pipeline"]
