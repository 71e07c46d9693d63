"""Verdict rules that exist because a shared CPU runs the measured code.

Other processes take the CPU (the run-queue wait, taken out by the core's contention rule where it
was accounted), and slow the machine itself for seconds at a time or between sessions in ways no
counter sees (the machine's state, measured beside the test by reference.py). These rules tell such
moves from a change in the code; the GPU path never loads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_gpuperf.measure.host.cpu.contention import Contention
from pytest_gpuperf.measure.host.cpu.reference import DEFAULT_NOISE, NOISE
from pytest_gpuperf.model import Comparison, Kind, Verdict
from pytest_gpuperf.model.busy import DURATION_UNITS
from pytest_gpuperf.verdict.case import Case
from pytest_gpuperf.verdict.pipeline import Step
from pytest_gpuperf.verdict.rules import judged_change


@dataclass(frozen=True)
class BusyRunner:
    """Where the run-queue wait could not be taken out, a time change measured busy is no verdict.

    Every measurement this version takes carries its scheduler accounting, and the contention rule
    judges those on corrected times. What is left: a measurement with no accounting (a recorded one,
    an older results file) whose contention counters read busy is UNSTABLE, and still suspected; an
    entry written busy that keeps no correction (written before corrections were recorded, or whose
    correction was too uncertain to keep) inflates the reference, so only a regression beyond it
    stands: anything else against it is NOT_GATED. Off with ``busy_policy=judge``.
    """

    name: str = "busy-runner"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        entry = case.entry
        if entry is not None and entry.written_busy and entry.correction is None:
            if draft.verdict is Verdict.REGRESSION:
                said = f"the baseline was written while the runner was busy ({entry.written_busy})"
                return Step(f"{said}: a regression against a slow baseline is larger still", quiet=True)
            return Step(
                f"not gated: the baseline was written while the runner was busy ({entry.written_busy}) and keeps no "
                "correction for it, so it can hide a regression (--gpuperf-strict makes this fail); write it again "
                "with --gpuperf-update-baseline",
                Verdict.NOT_GATED,
                final=True,
            )
        if draft.verdict not in (Verdict.REGRESSION, Verdict.IMPROVEMENT) or case.measurement.scheduling is not None:
            return None
        contention = Contention.from_data(case.measurement.health)
        if contention is None or not contention.busy:
            return None
        change = f"{draft.change:+.1%} " if draft.change is not None else ""
        return Step(f"unstable: the runner was busy ({contention.describe()}) and this measurement has no scheduler "
                    f"accounting to take the contention out; the {change}change is not judged",
                    Verdict.UNSTABLE)  # fmt: skip


@dataclass(frozen=True)
class MachineStateChange:
    """How the machine's state moved between the baseline and now, by the reference measured beside each.

    Each kind's ratio counts only beyond its own noise (reference.NOISE): a kind that read x1.40 with a
    noise of 25% moved x1.12 beyond it. ``slower``: the kind that runs most slowly now; ``faster``: the middle
    kind's slowdown at the baseline (``_beyond``); each with its ratio and what of it lies beyond its noise
    (None: not past its noise).
    """

    slower: tuple[str, float, float] | None
    faster: tuple[str, float, float] | None

    @classmethod
    def between(cls, now: Mapping[str, float], base: Mapping[str, float]) -> MachineStateChange | None:
        """None where either side has no reference (another host, an older file)."""
        ratios = {kind: now[kind] / base[kind] for kind in now.keys() & base.keys() if base[kind] > 0 and now[kind] > 0}
        if not ratios:
            return None
        return cls(_beyond(ratios, most=True), _beyond({k: 1.0 / r for k, r in ratios.items()}, most=False))


def _beyond(ratios: Mapping[str, float], *, most: bool) -> tuple[str, float, float] | None:
    """The kind whose ratio lies furthest beyond its noise (``most``), else the middle kind's, with its ratio and
    that part (None: it lies within its noise).

    Explaining a regression takes the most-moved kind: a test may be bound by that work alone. Taking a
    pass away (a baseline written in a slower state) takes the middle one: most kinds must have moved, or
    one kind's wandering would leave every test against that baseline unjudged.
    """
    beyond = {kind: ratio / (1.0 + NOISE.get(kind, DEFAULT_NOISE)) for kind, ratio in ratios.items()}
    ordered = sorted(beyond, key=beyond.__getitem__)
    kind = ordered[-1] if most else ordered[(len(ordered) - 1) // 2]
    return (kind, ratios[kind], beyond[kind]) if beyond[kind] > 1.0 else None


@dataclass(frozen=True)
class MachineState:
    """A change the machine's state explains is no verdict, and neither is a pass against a baseline written in
    a slower state: the reference work measured beside the test (reference.py) says how the state moved.

    A regression within what the most-slowed kind of work explains (its slowdown beyond its own noise,
    times one plus the threshold) is UNSTABLE; a larger one stands, with the machine's share said. Against
    a baseline whose reference ran slower than now beyond its noise, for most kinds of work, a faster test is
    UNSTABLE too, and so is an unchanged one whose change, taken back to the baseline's state, would pass the
    threshold: that baseline makes every later run look faster and hides regressions. Time, and
    metrics that are durations.
    """

    name: str = "machine-state"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        entry = case.entry
        if entry is None or not _timed(case):
            return None
        moved = MachineStateChange.between(case.measurement.reference_ns, entry.reference_ns)
        if moved is None:
            return None
        change = judged_change(case, draft) if case.kind is Kind.TIME else draft.change
        if draft.verdict is Verdict.REGRESSION and moved.slower is not None:
            kind, ratio, beyond = moved.slower
            threshold = draft.threshold or case.settings.threshold
            explains = beyond * (1.0 + threshold) - 1.0
            slower = (f"{_work(kind)} ran x{ratio:.2f} slower than when the baseline was written (x{beyond:.2f} "
                      "beyond its own spread; the reference measured beside the test: another tenant on the core, "
                      "a slower clock)")  # fmt: skip
            if change is None or change <= explains:
                return Step(f"not judged: {slower}, which alone can explain up to {explains:+.1%}", Verdict.UNSTABLE)
            return Step(f"{slower}, which explains at most {explains:+.1%}: {change:+.1%} is more than the machine")
        if draft.verdict in (Verdict.UNCHANGED, Verdict.IMPROVEMENT) and moved.faster is not None:
            kind, ratio, beyond = moved.faster
            threshold = draft.threshold or case.settings.threshold
            # what the change would read had the baseline been written in today's state: a pass it cannot take
            # past the threshold hides no regression (the mirror of the bound a regression is held to above)
            hidden = None if change is None else (1.0 + change) * beyond - 1.0
            if draft.verdict is Verdict.UNCHANGED and hidden is not None and hidden <= threshold:
                return None
            could = "" if hidden is None else f" ({change:+.1%} could be up to {hidden:+.1%})"
            return Step(
                f"not judged: the baseline was written while {_work(kind)} ran x{ratio:.2f} slower than now (the "
                f"reference measured beside it), so a regression could hide behind it{could}; write it again with "
                "--gpuperf-update-baseline",
                Verdict.UNSTABLE,
            )
        return None


def _work(kind: str) -> str:
    """``interpreter work`` for the kind ``interpreter.1``: its name without its version."""
    return f"{kind.split('.', 1)[0]} work"


def _timed(case: Case) -> bool:
    """The test's time, or a metric that is a duration (a compile's first call)."""
    if case.kind is Kind.TIME:
        return True
    return case.kind is Kind.METRIC and case.metric is not None and case.metric.unit in DURATION_UNITS
