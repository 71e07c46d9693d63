"""What a session does (``Mode``) and what follows from it (``ModePlan``), decided in one table.

Every behaviour that differs between modes is an attribute of the mode's plan: which engine
measures, which rule lists judge, what is confirmed, written and shown. The plan is picked once
(``GpuperfConfig.plan``, ``plan_for``) and asked by name; nothing else compares modes, except
the reports that print the mode's word (``tests/test_layers.py`` checks it). As pytest-xdist picks
its scheduler once and pytest-codspeed its instrument, a new mode is a new row here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

DEFAULT_THRESHOLD = 0.10  # relative time change that counts as a regression (against stored baselines)
DEFAULT_COMPARE_REF_THRESHOLD = 0.02  # the same with --gpuperf-compare-ref (interleaved, same machine)


class Mode(str, Enum):
    """What a session does (``GpuperfConfig.mode``); a ``str`` so a results file keeps the plain word."""

    SMOKE = "smoke"  # no --gpuperf: one call per perf test, nothing measured or compared
    BASELINE = "baseline"  # gate against the git-tracked baselines
    UPDATE = "update"  # --gpuperf-update-baseline: measure and write baselines
    COMPARE_REF = "compare-ref"  # --gpuperf-compare-ref: head and base measured in alternating rounds
    COMPARE_FILES = "compare-files"  # `gpuperf compare`: two results files, nothing measured

    def __str__(self) -> str:  # the word, in messages and f-strings, on every Python version
        return self.value


class EngineKind(str, Enum):
    """Which engine measures a session (the session builds it, once)."""

    LOCAL = "local"  # measure here, judge against the baseline store (engine.LocalEngine)
    COMPARE_REF = "compare-ref"  # alternate rounds with a worker at the base ref (engines.compare_ref.engine)


@dataclass(frozen=True)
class ModePlan:
    """One mode's choices. Each attribute answers one question the rest of the package would otherwise
    answer by comparing modes."""

    mode: Mode
    engine: EngineKind | None  # None: nothing is measured (``gpuperf compare`` judges two files)
    measures: bool  # tests are measured and judged (False: smoke, one call per test)
    # Head and base in alternating rounds on one machine: the host's drift cancels, so the interleaved rule
    # lists (verdict.rulesets), no host-guard rules or reference work, and "auto" pins both to one core.
    interleaved: bool
    default_threshold: float  # the time threshold when neither option, ini nor marker sets one
    gates_against_baselines: bool  # a regression against the stored baselines fails the test
    writes_baselines: bool  # measurements become baseline entries (with readings in fresh processes)
    confirms_suspicions: bool  # a suspected change is re-measured before it stands (--gpuperf-remeasure)
    charts_baseline_history: bool  # the HTML report draws each measurement's history from the baselines' git log

    @property
    def takes_reference(self) -> bool:
        """Each measurement times the host's reference work beside its rounds: a frozen number (baseline mode, and
        the baselines written for it) must say in which state of the machine it was taken."""
        return self.measures and not self.interleaved

    @property
    def profiles_regressions(self) -> bool:
        """A confirmed regression gets its differential profile (a baseline write stores the profile instead)."""
        return self.measures and not self.writes_baselines

    @property
    def busy_runner_rule(self) -> bool:
        """The busy-runner rule judges this mode: a baseline write records its contention instead (its entry
        is noted, and every later gate says so)."""
        return not self.writes_baselines


_PLANS = {
    plan.mode: plan
    for plan in (
        ModePlan(Mode.SMOKE, EngineKind.LOCAL, measures=False, interleaved=False,
                 default_threshold=DEFAULT_THRESHOLD, gates_against_baselines=False, writes_baselines=False,
                 confirms_suspicions=False, charts_baseline_history=True),
        ModePlan(Mode.BASELINE, EngineKind.LOCAL, measures=True, interleaved=False,
                 default_threshold=DEFAULT_THRESHOLD, gates_against_baselines=True, writes_baselines=False,
                 confirms_suspicions=True, charts_baseline_history=True),
        ModePlan(Mode.UPDATE, EngineKind.LOCAL, measures=True, interleaved=False,
                 default_threshold=DEFAULT_THRESHOLD, gates_against_baselines=False, writes_baselines=True,
                 confirms_suspicions=False, charts_baseline_history=True),
        ModePlan(Mode.COMPARE_REF, EngineKind.COMPARE_REF, measures=True, interleaved=True,
                 default_threshold=DEFAULT_COMPARE_REF_THRESHOLD, gates_against_baselines=False,
                 writes_baselines=False, confirms_suspicions=True, charts_baseline_history=False),
        ModePlan(Mode.COMPARE_FILES, None, measures=False, interleaved=False,
                 default_threshold=DEFAULT_THRESHOLD, gates_against_baselines=False, writes_baselines=False,
                 confirms_suspicions=False, charts_baseline_history=False),
    )
}  # fmt: skip


def plan_for(mode: Mode | str) -> ModePlan:
    """The plan of ``mode`` (its word, as a results file or the history store holds it, will do)."""
    return _PLANS[Mode(mode)]
