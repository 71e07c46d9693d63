"""The verdict: one pipeline of small, named rules that every mode shares.

Each rule of the mode's list (``rulesets.py``) may set the threshold, change the verdict or stop the
pipeline, and says why in a note, kept in ``Comparison.explanation``. The modes differ only in their
evidence (``evidence.py``) and rule lists; host guards (``pytest_gpuperf.measure.host``) add their rules.

May import: the model, config, stats, units and errors; no measuring, storing or reporting.
"""

from __future__ import annotations

from pytest_gpuperf.verdict.case import Case, Evidence
from pytest_gpuperf.verdict.judge import Reference, fails, judge
from pytest_gpuperf.verdict.pipeline import Rule, Step, run_pipeline
from pytest_gpuperf.verdict.rulesets import RuleSet

__all__ = ["Case", "Evidence", "Reference", "Rule", "RuleSet", "Step", "fails", "judge", "run_pipeline"]
