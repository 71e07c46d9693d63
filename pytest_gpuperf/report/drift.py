"""What changed in the environment between a run and what it was judged against, and when that is the likelier cause.

Each measurement was judged against a reference that recorded its environment: the stored baseline entry
(baseline mode), the base file's measurement (``gpuperf compare``), or the base measured beside it
(compare-ref: one job, one machine, one set of packages, so nothing can differ). What differs is
``measure.env.environment_changes`` of the two; the reports say it, grouped by the set of changes
(entries written at different times can differ in different ways).

When every judged measurement of a run moved the same way and each one's reference was taken in another
environment, the environment is the likelier cause than the code: code changes rarely slow every test
alike, a new driver or torch often does. This is a reading for the reader, not a verdict; the verdicts
stand as the gate reached them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gpuperf.measure.env import EnvChange, environment_changes
from pytest_gpuperf.model import SessionResults, Verdict
from pytest_gpuperf.modes import plan_for
from pytest_gpuperf.report.rows import plural, time_comparison

# Fewer judged measurements than this moving together say nothing about a common cause.
MOVED_TOGETHER_MIN = 2
_MOVED = {Verdict.REGRESSION: "got slower", Verdict.IMPROVEMENT: "got faster"}
_JUDGED = (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED)


@dataclass(frozen=True)
class Drift:
    """One set of environment changes and the measurements whose reference was taken before them."""

    changes: tuple[EnvChange, ...]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class SessionDrift:
    """A run's environment drift: each set of changes, and how its judged measurements moved."""

    reference: str  # "the baseline" or "the base": what the measurements were judged against
    drifts: tuple[Drift, ...]  # most measurements first
    judged: tuple[str, ...]  # the measurements whose time was judged (regression, improvement or unchanged)
    together: Verdict | None  # the one way (slower, faster) every judged measurement moved, if enough did

    @property
    def environment_likelier(self) -> bool:
        """Every judged measurement moved one way and each one's reference was taken in another environment."""
        drifted = {key for d in self.drifts for key in d.keys}
        return self.together is not None and set(self.judged) <= drifted


def session_drift(session: SessionResults) -> SessionDrift:
    """The environment changes between ``session`` and the references its measurements were judged against."""
    groups: dict[tuple[EnvChange, ...], list[str]] = {}
    for r in session.results:
        before = r.baseline.environment if r.baseline is not None else None
        if before is None or before.device_class != session.environment.device_class:
            continue  # not recorded (an old entry), or another class's entry: "not comparable" says so
        changes = environment_changes(before, session.environment)
        if changes:
            groups.setdefault(changes, []).append(r.measurement.key)
    drifts = tuple(sorted((Drift(c, tuple(k)) for c, k in groups.items()), key=lambda d: -len(d.keys)))
    judged = [(r.measurement.key, t.verdict) for r in session.results
              if (t := time_comparison(r)) is not None and t.verdict in _JUDGED]  # fmt: skip
    ways = {verdict for _, verdict in judged}
    together = ways.pop() if len(ways) == 1 and len(judged) >= MOVED_TOGETHER_MIN else None
    plan = plan_for(session.mode)
    reference = "the baseline" if plan.gates_against_baselines or plan.writes_baselines else "the base"
    keys = tuple(key for key, _ in judged)
    return SessionDrift(reference, drifts, keys, together if together in _MOVED else None)


def change_sentences(drift: SessionDrift) -> list[str]:
    """What changed, one plain sentence per set of changes (each renderer makes them inert its own way)."""
    total = sum(len(d.keys) for d in drift.drifts)
    lines = []
    for d in drift.drifts:
        alone = len(drift.drifts) == 1 and len(d.keys) == total
        which = "" if alone else f" (for {plural(len(d.keys), 'measurement')})"
        lines.append(f"environment changed since {drift.reference}{which}: {', '.join(map(str, d.changes))}")
    return lines


def cause_sentence(drift: SessionDrift) -> str | None:
    """The environment named the likelier cause, where ``SessionDrift.environment_likelier``."""
    if not drift.environment_likelier or drift.together is None:
        return None
    return (
        f"all {len(drift.judged)} measurements judged {_MOVED[drift.together]}, each against {drift.reference} "
        "taken in another environment: the environment is the likelier cause than the code"
    )


def drift_sentences(drift: SessionDrift) -> list[str]:
    """What changed, then the likelier cause where it is the environment."""
    cause = cause_sentence(drift)
    return [*change_sentences(drift), *([cause] if cause else [])]
