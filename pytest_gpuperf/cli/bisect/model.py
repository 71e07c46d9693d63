"""What a bisect finds: each step's verdict and evidence, and the outcome with its exit code."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_gpuperf.errors import BisectError

__all__ = ["BisectError"]  # defined in errors.py with the plugin's other exceptions
from pytest_gpuperf.model import Comparison

EXIT_FOUND = 0
EXIT_NOT_REPRODUCED = 1  # BAD is not slower than GOOD, or BAD itself cannot be measured
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3  # an unknown ref, GOOD not an ancestor of BAD, not a git repository
EXIT_RANGE = 4  # skipped commits hide which of a range is the first bad one


class StepVerdict(str, enum.Enum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"
    INCONCLUSIVE = "inconclusive"  # a change beyond the threshold that is not significant: neither good nor bad


class Status(str, enum.Enum):
    FOUND = "found"  # one first bad commit
    RANGE = "range"  # skipped or inconclusive commits hide which of ``suspects`` is the first bad one
    BAD_NOT_SLOWER = "bad-not-slower"  # BAD measured as good as GOOD: nothing to find
    BAD_UNTESTABLE = "bad-untestable"  # BAD itself could not be measured, or twice gave no answer

    @property
    def exit_code(self) -> int:
        return {Status.FOUND: EXIT_FOUND, Status.RANGE: EXIT_RANGE}.get(self, EXIT_NOT_REPRODUCED)


@dataclass(frozen=True)
class Finding:
    """One comparison of a step's results file: a regression's evidence, or a good step's largest change."""

    key: str  # <node id>::<measurement name>
    metric: str  # "time.p50", "memory.peak_allocated", "metric.<name>"
    verdict: str
    current: float
    reference: float | None  # GOOD's value in the same run
    unit: str
    change: float | None
    ci_low: float | None  # of the ratio current / reference
    ci_high: float | None
    p_value: float | None
    evidence: str

    @classmethod
    def of(cls, key: str, c: Comparison) -> Finding:
        return cls(key, c.metric, c.verdict.value, c.current, c.baseline, c.unit, c.change, c.ci_low, c.ci_high,
                   c.p_value, c.evidence)  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One measured commit."""

    commit: str
    subject: str
    verdict: StepVerdict
    findings: tuple[Finding, ...] = ()  # bad: every failing comparison; good: the largest time change;
    # inconclusive: the changes beyond their threshold that were not significant
    reason: str = ""  # skip, inconclusive: why the commit could not be judged


@dataclass(frozen=True)
class Outcome:
    """What the search found, with every step it took (in the order taken)."""

    good: str
    bad: str
    candidates: tuple[str, ...]  # oldest first, BAD last
    steps: tuple[Step, ...]
    status: Status
    suspects: tuple[str, ...] = ()  # FOUND: the first bad commit; RANGE: the commits one of which is
    subjects: Mapping[str, str] = field(default_factory=dict)

    @property
    def first_bad(self) -> str | None:
        return self.suspects[0] if self.status is Status.FOUND else None

    def step_of(self, commit: str) -> Step | None:
        """The commit's last step (an inconclusive step is measured again)."""
        return next((s for s in reversed(self.steps) if s.commit == commit), None)
