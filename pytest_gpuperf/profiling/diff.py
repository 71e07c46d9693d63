"""The differential profile: which operators and kernels a regression changed.

Ops of the two ``OpProfile`` tables are matched by kind and name and ranked by how much their
time per call changed, so the op behind a slowdown comes first whether it got slower, was added
or is now called twice; ops that merely got faster follow the rest. Two tables compare only when
one profiler took both (the ``same profiler`` rule): a table by operator and one by function
(profiling/capture.py) share no row, and the head's is listed alone with a note saying why.
"""

from __future__ import annotations

from pytest_gpuperf.model import MeasuredChange, OpChange, OpProfile, OpStat, ProfileDiff
from pytest_gpuperf.profiling.explain import explain

# Below this share of the head's total, a change is profiler jitter, not a cause.
NEGLIGIBLE_SHARE = 0.005
PROFILERS = {"torch": "by operator (torch.profiler)", "python": "by function (Python's profiler)"}


def _rank(change: OpChange) -> tuple[bool, float]:
    """Slower, added and removed ops first by the size of their change; ops that only got faster last.

    A removed op stays up front: a kernel replaced by another reads as the pair.
    """
    sped_up = change.status == "changed" and change.delta_ns <= 0
    return sped_up, -abs(change.delta_ns)


def _row(before: OpStat | None, after: OpStat | None, base: OpProfile, head: OpProfile) -> OpChange | None:
    """The row of one op; None for an op on one side only whose time fits under the other side's cut.

    An op the other side's table left out may have been there at up to that side's cut
    (``OpChange.absent_below_ns``): a change no larger than the cut could be none.
    """
    stat = after or before
    assert stat is not None
    cut = base.omitted_below_ns if before is None else head.omitted_below_ns if after is None else 0.0
    change = OpChange(stat.name, stat.kind, before, after, head.on_device, absent_below_ns=cut)
    return None if cut and abs(change.delta_ns) <= cut else change


def diff_profiles(
    head: OpProfile,
    base: OpProfile | None,
    *,
    base_label: str,
    head_trace: str | None = None,
    base_trace: str | None = None,
    note: str = "",
    measured: MeasuredChange | None = None,
) -> ProfileDiff:
    """Rank the ops of ``head`` against ``base`` (or list the head's alone when there is no base), and explain
    ``measured`` (the gate's change per call; None: the profile's own) with rows that add up to it (explain.py)."""
    if base is not None and base.profiler != head.profiler:  # the ``same profiler`` rule
        note = note or (f"{base_label}'s profile is {PROFILERS[base.profiler]}, the head's "
                        f"{PROFILERS[head.profiler]}: they do not compare (one side runs torch operators, the other "
                        "none); the head's rows alone")  # fmt: skip
        base = None
    if base is None:
        rows = [OpChange(s.name, s.kind, None, s, head.on_device) for s in head.ops]
        rows.sort(key=lambda c: c.head_ns, reverse=True)
        note = note or f"{base_label} has no stored profile: the head's top rows alone"
    else:
        total = (head.device_ns if head.on_device else head.host_ns) or 0.0
        before = {(s.kind, s.name): s for s in base.ops}
        after = {(s.kind, s.name): s for s in head.ops}
        rows = []
        for key in dict.fromkeys([*after, *before]):
            change = _row(before.get(key), after.get(key), base, head)
            if change is not None and (change.calls_changed or abs(change.delta_ns) > NEGLIGIBLE_SHARE * total):
                rows.append(change)
        rows.sort(key=_rank)
    why = explain(head, base, measured) if base is not None else None
    return ProfileDiff(
        head=head, base=base, base_label=base_label, changes=tuple(rows),
        head_trace=head_trace, base_trace=base_trace, note=note, measured=measured,
        rows=why.rows if why else (), profile_change=why.profile_change if why else None,
        finding=why.finding if why else None, basis=why.basis if why else "device" if head.on_device else "host",
    )  # fmt: skip
