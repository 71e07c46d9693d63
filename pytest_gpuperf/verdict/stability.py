"""Is a runner steady enough for baseline mode? The spread of unchanged code between sessions.

When unchanged code's log change against its baseline spreads by ``s`` from one
gating session to the next, a threshold ``T`` gives at most ``false_alarms`` only
if ``T >= z(1 - false_alarms) s``, and catches a slowdown ``d`` at least ``caught``
of the time only if ``log(1 + d) - T >= z(caught) s``. So ``s`` alone sets the
smallest slowdown baseline mode can be trusted with on that runner. The spread is
the root mean square of the log changes around zero: an offset between the writing
and the gating sessions is error to a gate like any other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_gpuperf.errors import NoChanges
from pytest_gpuperf.model import Kind, SessionResults, Verdict

DEFAULT_SLOWDOWN = 0.15  # the smallest slowdown baseline mode aims to catch
DEFAULT_FALSE_ALARMS = 0.02
DEFAULT_CAUGHT = 0.95
UPPER_BOUND_CONFIDENCE = 0.90  # of the spread's upper bound


def _z(probability: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(probability))


def _check_rates(false_alarms: float, caught: float) -> None:
    if not (0.0 < false_alarms < 1.0 and 0.0 < caught < 1.0):
        raise ValueError(f"false-alarm rate and share caught must be in (0, 1), got {false_alarms} and {caught}")


def spread_limit(slowdown: float, false_alarms: float = DEFAULT_FALSE_ALARMS, caught: float = DEFAULT_CAUGHT) -> float:
    """The largest spread ``s`` at which some threshold meets both targets for ``slowdown``."""
    _check_rates(false_alarms, caught)
    if slowdown <= 0.0:
        raise ValueError(f"slowdown must be positive, got {slowdown}")
    return math.log1p(slowdown) / (_z(1.0 - false_alarms) + _z(caught))


def smallest_caught_slowdown(
    spread: float, false_alarms: float = DEFAULT_FALSE_ALARMS, caught: float = DEFAULT_CAUGHT
) -> float:
    """The smallest slowdown a gate on a frozen number catches ``caught`` of the time at ``spread``."""
    _check_rates(false_alarms, caught)
    if spread < 0.0:
        raise ValueError(f"spread must be >= 0, got {spread}")
    return math.expm1(spread * (_z(1.0 - false_alarms) + _z(caught)))


def rms_log_change(changes: Iterable[float]) -> float:
    """Root mean square of ``log(1 + change)`` around zero."""
    logs = [math.log1p(c) for c in changes]
    if not logs:
        raise ValueError("rms_log_change: no changes")
    return math.sqrt(sum(x * x for x in logs) / len(logs))


def spread_upper_bound(spread: float, sessions: int, confidence: float = UPPER_BOUND_CONFIDENCE) -> float:
    """A one-sided upper confidence bound on the spread: chi-square, one degree of freedom per session.

    The changes of one session's tests move together, so only the sessions count as independent.
    """
    from scipy.stats import chi2

    if sessions < 1:
        raise ValueError("spread_upper_bound: needs at least one session")
    return spread * math.sqrt(sessions / float(chi2.ppf(1.0 - confidence, sessions)))


@dataclass(frozen=True)
class MeasurementSpread:
    key: str
    changes: tuple[float, ...]

    @property
    def rms(self) -> float:
        return rms_log_change(self.changes)

    @property
    def mean(self) -> float:
        return sum(math.log1p(c) for c in self.changes) / len(self.changes)


@dataclass(frozen=True)
class Stability:
    """The spread of unchanged code's time changes over baseline-mode sessions."""

    sessions: int
    metric: str
    measurements: tuple[MeasurementSpread, ...]

    @property
    def changes(self) -> list[float]:
        return [c for m in self.measurements for c in m.changes]

    @property
    def spread(self) -> float:
        return rms_log_change(self.changes)

    @property
    def spread_upper(self) -> float:
        return spread_upper_bound(self.spread, self.sessions)


def time_changes(session: SessionResults) -> dict[str, tuple[str, float]]:
    """Each measurement's time change against its baseline: key -> (metric, change)."""
    out = {}
    for result in session.results:
        for c in result.comparisons:
            judged = c.verdict not in (Verdict.NEW, Verdict.NOT_COMPARABLE, Verdict.NOT_GATED)
            if c.kind is Kind.TIME and judged and c.change is not None and c.change > -1.0:
                out[c.key] = (c.metric, c.change)
                break
    return out


def assess(sessions: Sequence[SessionResults]) -> Stability:
    """The spread over ``sessions``: baseline-mode gating runs of the same, unchanged code."""
    by_key: dict[str, list[float]] = {}
    metrics: set[str] = set()
    counted = 0
    for session in sessions:
        changes = time_changes(session)
        if changes:
            counted += 1
        for key, (metric, change) in changes.items():
            metrics.add(metric)
            by_key.setdefault(key, []).append(change)
    if not by_key:
        raise NoChanges("no time change against a baseline in these results", sessions=len(sessions))
    spreads = tuple(MeasurementSpread(key, tuple(changes)) for key, changes in sorted(by_key.items()))
    return Stability(sessions=counted, metric=", ".join(sorted(metrics)), measurements=spreads)


def _reach(spread: float, upper: float, limit: float) -> str:
    if upper <= limit:
        return "within reach of baseline mode on this runner"
    if spread <= limit:
        return "within reach at this spread but not at its upper bound: gather more sessions to be sure"
    return "not reliably caught by baseline mode on this runner; use --gpuperf-compare-ref for changes this small"


def render(
    stability: Stability,
    slowdown: float = DEFAULT_SLOWDOWN,
    false_alarms: float = DEFAULT_FALSE_ALARMS,
    caught: float = DEFAULT_CAUGHT,
) -> str:
    """The per-measurement table and what it means for baseline mode on this runner."""
    width = max(len("measurement"), *(len(m.key) for m in stability.measurements))
    lines = [
        f"{len(stability.changes)} time changes ({stability.metric}) against baselines in "
        f"{stability.sessions} session(s)",
        "",
        f"{'measurement':<{width}}  sessions  spread  mean",
    ]
    lines += [f"{m.key:<{width}}  {len(m.changes):>8}  {m.rms:>6.1%}  {m.mean:+.1%}" for m in stability.measurements]
    spread, upper = stability.spread, stability.spread_upper
    lines.append(f"{'all':<{width}}  {stability.sessions:>8}  {spread:>6.1%}  ({UPPER_BOUND_CONFIDENCE:.0%} upper bound"
                 f" {upper:.1%})")  # fmt: skip
    smallest, smallest_upper = (smallest_caught_slowdown(s, false_alarms, caught) for s in (spread, upper))
    limit = spread_limit(slowdown, false_alarms, caught)
    lines += [
        "",
        f"spread: root mean square of the log change against the baseline; a gate on a baseline keeps false "
        f"alarms at most {false_alarms:.0%} and catches {caught:.0%} of slowdowns of {smallest:.1%} or more at "
        f"this spread ({smallest_upper:.1%} at its upper bound).",
        f"{slowdown:.0%} slowdowns: {_reach(spread, upper, limit)} (that needs a spread of at most {limit:.1%}).",
    ]
    if stability.sessions < 5:
        lines.append(f"only {stability.sessions} session(s): the spread is a rough estimate; gather more runs.")
    return "\n".join(lines) + "\n"
