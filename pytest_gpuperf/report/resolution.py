"""What each time comparison can resolve (``Comparison.detectable``), as the reports show it.

One cell per measurement (``detectable_cell``) and one grouped note (``resolution_lines``): the measurements
whose threshold lies below the change they can tell from none, the range of what they resolve, and the
command that would resolve it: more fresh pairs, more time, or a quieter runner where more readings cannot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_gpuperf.config import DEFAULT_MAX_TIME_S
from pytest_gpuperf.model import Detectable, Kind, MeasurementResult, SessionResults
from pytest_gpuperf.report.repro import Rerun, rerun_of
from pytest_gpuperf.report.rows import named, plural

FRESH_PAIRS = "fresh pairs"
_MAX_TIME = "--gpuperf-max-time"
_CONFIRM_PAIRS = "--gpuperf-confirm-pairs"


def detectable_of(result: MeasurementResult) -> Detectable | None:
    """The detectable change of ``result``'s time comparison, if it has one."""
    timing = next((c for c in result.comparisons if c.kind is Kind.TIME), None)
    return timing.detectable if timing is not None else None


def detectable_cell(result: MeasurementResult) -> str:
    """``1.2%``, ``4.5% > 2.0%`` where it does not resolve its threshold, ``-`` where none was figured."""
    d = detectable_of(result)
    if d is None:
        return "-"
    return f"{d.change:.1%}" if d.resolves else f"{d.change:.1%} > {d.threshold:.1%}"


def unresolved(session: SessionResults) -> list[tuple[MeasurementResult, Detectable]]:
    """The measurements whose threshold is below what they can resolve, in the session's order."""
    return [(r, d) for r in session.results if (d := detectable_of(r)) is not None and not d.resolves]


def resolution_lines(session: SessionResults) -> list[str]:
    """The grouped note: which measurements cannot resolve their threshold, what they resolve, and what would.

    Two lines at most, each short: the count, the thresholds and the range with the first keys; then what to
    do, with the command for the first of them (``Rerun``)."""
    found = unresolved(session)
    if not found:
        return []
    keys = [r.measurement.key for r, _ in found]
    changes = sorted(d.change for _, d in found)
    span = f"{changes[0]:.1%}" if len(changes) == 1 else f"{changes[0]:.1%} to {changes[-1]:.1%}"
    thresholds = sorted({f"{d.threshold:.1%}" for _, d in found})
    power = f"{found[0][1].power:.0%}"
    one = len(found) == 1
    resolve = "it resolves" if one else "they resolve"
    first = (
        f"{plural(len(found), 'measurement')} cannot resolve {'its' if one else 'their'} threshold of "
        f"{', '.join(thresholds)}: {resolve} {span} at {power} power ({named(keys, 1)})"
    )
    return [first, _advice(session, found)]


def _advice(session: SessionResults, found: Sequence[tuple[MeasurementResult, Detectable]]) -> str:
    """What would resolve the first of ``found``: its command where more readings would, else a quieter runner."""
    known = [(r, d) for r, d in found if d.needed is not None]
    result, d = max(known, key=lambda item: item[1].needed or 0) if known else found[0]
    if d.needed is None:
        where = "gate with --gpuperf-compare-ref" if not session.compare_ref else "run on a quieter runner"
        return f"more readings cannot: {d.limit or 'their noise'}; write the baseline on a quieter runner, or {where}"
    rerun = rerun_of(session)
    if d.reading == FRESH_PAIRS:
        option, what = f"{_CONFIRM_PAIRS}={d.needed}", f"about {d.needed} fresh pairs"
    else:
        scale = d.needed / max(1, d.readings)
        seconds = _max_time(session.repro_args) * scale
        option, what = f"{_MAX_TIME}={_round_up(seconds)}", f"about {scale:.1f}x the {d.reading}"
    if rerun is None:
        return f"{what} would: {option}"
    args = tuple(a for a in rerun.args if not a.startswith(option.split("=")[0] + "="))
    return f"{what} would: {Rerun(rerun.base, (*args, option)).command(result.measurement)}"


def _max_time(args: Sequence[str]) -> float:
    """The session's --gpuperf-max-time (its default where it ran with it)."""
    for arg in args:
        if arg.startswith(f"{_MAX_TIME}="):
            try:
                return float(arg.split("=", 1)[1])
            except ValueError:
                break
    return DEFAULT_MAX_TIME_S


def _round_up(seconds: float) -> str:
    """``8``, ``2.5``: a budget rounded up to two significant digits."""
    if seconds <= 0:
        return "0"
    digits = 1 - math.floor(math.log10(seconds))
    scale = 10.0**digits
    return f"{math.ceil(seconds * scale) / scale:g}"
