"""A regression's explanation from two profiles: rows ranked by what they explain, an interval on every time, rows
that add up.

Each operator (on CUDA: kernel; of a Python profile: function) is matched by kind and name, and its
time per measured call is compared from each side's profiled calls (a Welch t-interval on the
difference of means). The rules, in order:

- ``counts``: an op added or removed, or called more or fewer times per measured call, is a fact
  (``exact``); what the count change costs is estimated from the time per invocation on both sides
  (count change x time per call), a tighter estimate than the op's whole time, and what is left of
  the op's change is judged like any time difference. Where both parts move the measured way they
  are one row; the count annotates it, it never ranks it.
- ``interval``: a time difference whose interval includes zero is not a cause; it is listed
  within the rest, as the profile's noise. The intervals are simultaneous over the rows
  (Bonferroni), so thirty unchanged ops do not make one false cause.
- ``sign``: a resolved change the other way (an op that got faster in a regression) is an
  offset, never a cause, except as the other half of a replacement.
- ``rank``: the causes by how much of the measured change each accounts for, largest first.
- ``replacement``: an op removed (or now under the head's cut) follows the largest cause that
  was added (or grew from under the base's cut) as the op it replaced (A replaced by B), so
  the rows shown net out what the change moved; a removal under ``REPLACED_SHARE`` of the
  leading cause stays in the rest.
- ``rest``: the causes plus a rest row sum to the measured change per call; a report that shows
  fewer rows folds the ones it leaves out into its rest row (:func:`leading`), so what it shows
  still adds up.
- ``agreement``: where the profile's own total change and the measured one are apart beyond both
  intervals, and the profile's has the other sign or is off by more than ``PROFILER_SCALE``, the
  profile cannot explain the change: one sentence says so instead of the rows.
- ``spread``: no resolved cause: the change is spread; the largest rows are listed with their intervals.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pytest_gpuperf.model import MeasuredChange, OpProfile, OpStat, WhyFinding, WhyReading, WhyRole, WhyRow
from pytest_gpuperf.profiling.torch_profile import launch_base

ALPHA = 0.05  # the family's error rate: every interval of one explanation at once
EXPLAINED_SHARE = 0.5  # causes that account for this share of the measured change explain it
# The profiler's own cost lands on every operator call, so a profile overstates a change in call
# counts; with many profiled calls its interval is narrow enough to sit apart from the measured one
# all the same. Within this factor, and with the same sign, it still speaks for the measured change
# (the rest row carries the difference).
PROFILER_SCALE = 2.0
# A removed op smaller than this share of the leading cause stays in the rest rather than pairing with a cause: a
# wrapper's or a small helper's removal is a detail, not the other half of the change.
REPLACED_SHARE = 0.1
REST = "[rest]"
HOST_ROWS = frozenset({"operator", "function"})  # a torch table's operators, a Python profile's functions
DEVICE_ROWS = frozenset({"kernel"})


@dataclass(frozen=True)
class Explanation:
    rows: tuple[WhyRow, ...]
    finding: WhyFinding
    profile_change: MeasuredChange | None
    basis: Literal["host", "device"]


Interval = tuple[float, float | None, float | None]  # estimate, low, high (None: no samples to bound it)


def mean_difference(head: Sequence[float], base: Sequence[float], confidence: float) -> Interval:
    """Mean of ``head`` minus mean of ``base`` with its Welch t-interval; no bounds with under two samples a side."""
    h, b = np.asarray(head, dtype=float), np.asarray(base, dtype=float)
    estimate = float(h.mean() - b.mean())
    if len(h) < 2 or len(b) < 2:
        return estimate, None, None
    vh, vb = h.var(ddof=1) / len(h), b.var(ddof=1) / len(b)
    se = math.sqrt(vh + vb)
    if se == 0:
        return estimate, estimate, estimate
    from scipy.special import stdtrit  # the t quantile, without scipy.stats' import (reports import this module)

    df = (vh + vb) ** 2 / (vh**2 / (len(h) - 1) + vb**2 / (len(b) - 1))
    half = float(stdtrit(df, 0.5 + confidence / 2)) * se
    return estimate, estimate - half, estimate + half


def mean_interval(samples: Sequence[float], confidence: float) -> Interval:
    """The mean of ``samples`` with its t-interval."""
    return mean_difference(samples, [0.0] * len(samples), confidence)


def _resolved(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and (low > 0 or high < 0)


@dataclass(frozen=True)
class _Side:
    """One side of an op: its stat (None: absent), its samples, and whether its absence is known (a complete table)."""

    stat: OpStat | None
    samples: tuple[float, ...]
    known: bool
    cut_ns: float = 0.0  # the table's cut, where the op is absent under it


class _Basis:
    """Which time the rows compare: device time of kernels on CUDA, host time of operators (functions) otherwise."""

    def __init__(self, device: bool) -> None:
        self.device = device
        self.kinds = DEVICE_ROWS if device else HOST_ROWS
        self.name: Literal["host", "device"] = "device" if device else "host"

    def samples(self, stat: OpStat) -> tuple[float, ...]:
        return stat.device_samples_ns if self.device else stat.host_samples_ns

    def time(self, stat: OpStat | None) -> float:
        return 0.0 if stat is None else stat.device_ns if self.device else stat.host_ns

    def totals(self, profile: OpProfile) -> tuple[float, ...]:
        """Each profiled call's total; the mean alone for a profile written before samples were kept."""
        samples = profile.device_samples_ns if self.device else profile.host_samples_ns
        return samples or ((profile.device_ns or 0.0) if self.device else profile.host_ns,)

    def side(self, stat: OpStat | None, profile: OpProfile) -> _Side:
        if stat is not None:
            return _Side(stat, self.samples(stat), True)
        n = len(profile.device_samples_ns if self.device else profile.host_samples_ns)
        return _Side(None, (0.0,) * n, profile.omitted_below_ns == 0, profile.omitted_below_ns)


def choose_basis(head: OpProfile, base: OpProfile) -> _Basis:
    """Device time on CUDA unless the host's change is resolved and larger (a launch-bound or Python slowdown)."""
    if not head.on_device:
        return _Basis(False)
    on_host, on_device = _Basis(False), _Basis(True)
    host = mean_difference(on_host.totals(head), on_host.totals(base), 1 - ALPHA)
    device = mean_difference(on_device.totals(head), on_device.totals(base), 1 - ALPHA)
    host_bound = _resolved(host[1], host[2]) and abs(host[0]) > abs(device[0])
    return _Basis(not host_bound)


def _op_rows(name: str, kind: str, base: _Side, head: _Side, basis: _Basis, confidence: float) -> list[WhyRow]:
    """The rows of one op: a count fact (exact) and what is left of its time, or its time change alone."""
    b_calls = base.stat.calls if base.stat else (0.0 if base.known else None)
    h_calls = head.stat.calls if head.stat else (0.0 if head.known else None)
    row = functools.partial(WhyRow, name, kind, base_calls=b_calls, head_calls=h_calls,  # type: ignore[arg-type]
                            base_ns=basis.time(base.stat), head_ns=basis.time(head.stat))  # fmt: skip
    if head.samples and base.samples:
        total, low, high = mean_difference(head.samples, base.samples, confidence)
    else:  # a table written before samples were kept
        total, low, high = basis.time(head.stat) - basis.time(base.stat), None, None
    if not (base.known and head.known) and low is not None and high is not None:
        # under a side's cut the op may have taken up to the cut there: its change is that much less certain
        cut = (base if base.stat is None else head).cut_ns
        low, high = (low - cut, high) if base.stat is None else (low, high + cut)
    if b_calls is None or h_calls is None:
        return [row("grew" if base.stat is None else "shrank", "noise", total, low, high)]
    if abs(h_calls - b_calls) < 0.5:
        return [row(_direction(total), "noise", total, low, high)]
    if base.stat is None or head.stat is None:
        return [row("appeared" if base.stat is None else "disappeared", "noise", total, low, high, exact=True)]
    # Time per invocation from both sides' calls; the count change times it is what the extra calls cost.
    per_call = [s / base.stat.calls for s in base.samples] + [s / head.stat.calls for s in head.samples]
    if per_call:
        unit, unit_low, unit_high = mean_interval(per_call, confidence)
    else:  # no samples: the base's time per invocation, without bounds
        unit, unit_low, unit_high = basis.time(base.stat) / base.stat.calls, None, None
    change = h_calls - b_calls
    counted = change * unit
    if unit_low is None or unit_high is None:
        count_row = row("calls", "noise", counted, exact=True)
    else:
        count_row = row("calls", "noise", counted, *sorted((change * unit_low, change * unit_high)), exact=True)
    left = total - counted
    shifted = (None, None) if low is None or high is None else (low - counted, high - counted)
    return [count_row, row(_direction(left), "noise", left, *shifted)]


def _direction(delta: float) -> WhyReading:
    return "slower" if delta > 0 else "faster" if delta < 0 else "unchanged"


def _role(row: WhyRow, sign: float) -> WhyRow:
    """``cause`` or ``offset`` for a resolved row (an exact count without samples is resolved by its count)."""
    resolved = _resolved(row.low_ns, row.high_ns) or (row.exact and row.low_ns is None and row.delta_ns != 0)
    if not resolved:
        return row
    role: WhyRole = "cause" if row.delta_ns * sign > 0 else "offset"
    return dataclasses.replace(row, role=role)


def _merged(rows: list[WhyRow]) -> list[WhyRow]:
    """An op's count row and the rest of its change as one row where both are causes (the ``counts`` rule)."""
    if len(rows) != 2 or any(r.role != "cause" for r in rows):
        return rows
    counted, left = rows

    def bound(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a + b

    low, high = bound(counted.low_ns, left.low_ns), bound(counted.high_ns, left.high_ns)
    return [dataclasses.replace(counted, delta_ns=counted.delta_ns + left.delta_ns, low_ns=low, high_ns=high)]


ADDED: frozenset[WhyReading] = frozenset({"appeared", "grew"})  # on the head's side only
REMOVED: frozenset[WhyReading] = frozenset({"disappeared", "shrank"})  # on the base's side only


def _other_half(reading: WhyReading) -> frozenset[WhyReading]:
    return REMOVED if reading in ADDED else ADDED if reading in REMOVED else frozenset()


def _pair_replacements(causes: list[WhyRow], offsets: list[WhyRow]) -> tuple[list[WhyRow], list[WhyRow]]:
    """Each cause that is an op on one side only, followed by the largest offset of its kind on the other side only
    (the same kernel at its former launch configuration first): A replaced by B. Offsets under ``REPLACED_SHARE``
    of the leading cause pair with none; the offsets left over are returned with the rest."""
    least = REPLACED_SHARE * abs(causes[0].delta_ns) if causes else 0.0
    gone = sorted((r for r in offsets if r.reading in ADDED | REMOVED and abs(r.delta_ns) >= least),
                  key=lambda r: -abs(r.delta_ns))  # fmt: skip
    ordered: list[WhyRow] = []
    paired: set[int] = set()
    for row in causes:
        ordered.append(row)
        halves = [g for g in gone if g.kind == row.kind and g.reading in _other_half(row.reading)]
        partner = next((g for g in halves if launch_base(g.name) == launch_base(row.name)), None) or next(
            iter(halves), None
        )
        if partner is not None:
            gone.remove(partner)
            paired.add(id(partner))
            ordered.append(dataclasses.replace(partner, role="replaced", other_half=row.name))
    return ordered, [r for r in offsets if id(r) not in paired]


def explain(head: OpProfile, base: OpProfile, measured: MeasuredChange | None) -> Explanation:
    """The rows of ``head`` against ``base`` that account for ``measured`` (None: the profile's own total change)."""
    basis = choose_basis(head, base)
    total = mean_difference(basis.totals(head), basis.totals(base), 1 - ALPHA)
    profile_change = None if total[1] is None or total[2] is None else MeasuredChange(*total)  # type: ignore[arg-type]
    target = measured or profile_change or MeasuredChange(total[0], total[0], total[0])
    before = {(s.kind, s.name): s for s in base.ops if s.kind in basis.kinds}
    after = {(s.kind, s.name): s for s in head.ops if s.kind in basis.kinds}
    keys = list(dict.fromkeys([*after, *before]))
    confidence = 1 - ALPHA / max(1, len(keys))  # Bonferroni: simultaneous over the rows
    sign = 1.0 if target.delta_ns >= 0 else -1.0
    rows = []
    for kind, name in keys:
        sides = basis.side(before.get((kind, name)), base), basis.side(after.get((kind, name)), head)
        rows += _merged([_role(row, sign) for row in _op_rows(name, kind, *sides, basis, confidence)])
    if measured is not None and profile_change is not None and _apart(measured, profile_change):
        return Explanation((), "disagrees", profile_change, basis.name)
    # the ``rank`` rule: by the share of the measured change a cause accounts for, largest first
    causes = sorted((r for r in rows if r.role == "cause"), key=lambda r: -r.delta_ns * sign)
    offsets = [r for r in rows if r.role == "offset"]
    shown, offsets = _pair_replacements(causes, offsets)
    accounted = sum(r.delta_ns for r in shown)
    rest = WhyRow(REST, "rest", "rest", "rest", target.delta_ns - accounted, target.low_ns - accounted,
                  target.high_ns - accounted)  # fmt: skip
    # Inside the rest: the measured direction first, largest first, so a faster op never leads a regression's list.
    within = sorted([*offsets, *(r for r in rows if r.role == "noise")],
                    key=lambda r: (r.delta_ns * sign <= 0, -abs(r.delta_ns)))  # fmt: skip
    return Explanation((*shown, rest, *within), _finding(shown, target, rows), profile_change, basis.name)


def leading(rows: Sequence[WhyRow], top: int | None = None, *, most: int | None = None) -> list[WhyRow]:
    """The rows a report shows before the rest: the first ``top`` causes (all: None), each with the op it replaced,
    no more rows than ``most`` with the rest row, and that rest row, carrying the causes left out, so that the
    rows shown and the rest add up to the measured change. [] where there is no rest row (a disagreeing profile)."""
    ahead = list(itertools.takewhile(lambda r: r.role != "rest", rows))
    rest = next((r for r in rows if r.role == "rest"), None)
    if rest is None:
        return []
    picked: list[WhyRow] = []
    causes = 0
    for i, row in enumerate(ahead):
        if row.role == "cause":
            pair = 2 if i + 1 < len(ahead) and ahead[i + 1].role == "replaced" else 1
            if (top is not None and causes == top) or (most is not None and len(picked) + pair + 1 > most):
                break
            causes += 1
        picked.append(row)
    left = sum(r.delta_ns for r in ahead[len(picked) :])
    if not left:
        return [*picked, rest]

    def shifted(bound: float | None) -> float | None:
        return None if bound is None else bound + left

    return [*picked, dataclasses.replace(rest, delta_ns=rest.delta_ns + left, low_ns=shifted(rest.low_ns),
                                         high_ns=shifted(rest.high_ns))]  # fmt: skip


def _finding(shown: list[WhyRow], target: MeasuredChange, rows: list[WhyRow]) -> WhyFinding:
    if rows and not any(r.low_ns is not None for r in rows) and not any(r.exact for r in rows):
        return "no-intervals"
    explained = sum(r.delta_ns for r in shown if r.role == "cause")
    if shown and target.delta_ns and explained / target.delta_ns >= EXPLAINED_SHARE:
        return "explained"
    return "partial" if shown else "spread"


def _apart(measured: MeasuredChange, profile: MeasuredChange) -> bool:
    """The ``agreement`` rule: the intervals are apart, and the profile's change has the other sign or
    is off by more than ``PROFILER_SCALE``."""
    if not (measured.high_ns < profile.low_ns or profile.high_ns < measured.low_ns):
        return False
    m, p = measured.delta_ns, profile.delta_ns
    return m * p <= 0 or not 1 / PROFILER_SCALE <= p / m <= PROFILER_SCALE
