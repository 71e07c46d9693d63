"""The change points an alert is made from, and the issue's text: one change, one issue.

``gpuperf history changes --format json`` writes one change point per event (the statistics
of a measurement that moved together, led by its gated statistic, the others under
``supporting``); they are read here field by field (a bad one is named by entry and field).
An issue is keyed by (test, measurement, device class, branch, first bad commit): the
statistic is not part of it, so one regression never opens two issues. Which change points are
new regressions, and the typed row they are read into, is the history's own rule
(``pytest_gpuperf.history.alerts``), the one ``gpuperf history changes`` exits 1 on. Every string in them comes
from test and metric names, so it goes into the issue as an inert code span
(``body.code``: no mention, link, tag or emphasis), and commits must be full hashes.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import body
import workflow
from workflow import ActionError

workflow.plugin_importable()
from pytest_gpuperf.history.alerts import ChangeRow, new_regressions  # noqa: E402
from pytest_gpuperf.history.model import ChangeKind  # noqa: E402

__all__ = ["Change", "Links", "code", "issue_body", "marker", "new_regressions", "parse_changes", "percent", "title"]

MARKER_PREFIX = "<!-- pytest-gpuperf-alert"
TITLE_MAX = 256  # GitHub's limit for an issue title
_HASH = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TEXT = ("test", "measurement", "statistic", "device_class", "branch", "unit")
_NUMBERS = ("change", "ci_low", "ci_high", "before", "after")
_KINDS = tuple(kind.value for kind in ChangeKind)


Change = ChangeRow  # one change point as ``gpuperf history changes --format json`` writes it


# --- reading the change points ------------------------------------------------------------------


def parse_changes(text: str, source: str) -> list[Change]:
    """The change points in ``text``; ActionError naming ``source``, the entry and the field at fault."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ActionError(f"{source}: not JSON: {exc}") from None
    if not isinstance(document, list):
        raise ActionError(f"{source}: expected a JSON list of change points")
    return [_change(entry, f"{source}: [{i}]") for i, entry in enumerate(document)]


def _change(entry: object, where: str) -> Change:
    if not isinstance(entry, dict):
        raise ActionError(f"{where}: expected an object")

    def field(name: str, check: Any, wanted: str) -> Any:
        if name not in entry:
            raise ActionError(f"{where}: the field {name!r} is missing")
        value = entry[name]
        if not check(value):
            raise ActionError(f"{where}.{name}: expected {wanted}, got {json.dumps(value)[:80]}")
        return value

    text: dict[str, Any] = {n: field(n, lambda v: isinstance(v, str), "a string") for n in _TEXT}
    numbers: dict[str, Any] = {n: _number(field(n, _finite_or_null, "a finite number or null")) for n in _NUMBERS}
    p_value = _number(field("p_value", _finite_or_null, "a finite number or null"))
    return Change(
        **text,
        last_good=field("last_good", lambda v: isinstance(v, str) and _HASH.fullmatch(v), "a full commit hash"),
        first_bad=field("first_bad", lambda v: isinstance(v, str) and _HASH.fullmatch(v), "a full commit hash"),
        **numbers,
        p_value=p_value,
        kind=ChangeKind(field("kind", lambda v: v in _KINDS, " or ".join(_KINDS))),
        runs_after=field("runs_after", _count, "a whole number >= 0"),
        gradual=field("gradual", lambda v: isinstance(v, bool), "true or false"),
        pending=_pending(entry.get("pending", False), where),
        supporting=_supporting(entry.get("supporting", []), f"{where}.supporting"),
    )


def _pending(value: object, where: str) -> bool:
    """Whether a change awaits more runs (optional: change points written before it carry none)."""
    if not isinstance(value, bool):
        raise ActionError(f"{where}.pending: expected true or false, got {json.dumps(value)[:80]}")
    return value


def _supporting(value: object, where: str) -> tuple[tuple[str, float | None], ...]:
    """An event's other statistics (optional: change points written before events carry none)."""
    if not isinstance(value, list):
        raise ActionError(f"{where}: expected a list, got {json.dumps(value)[:80]}")
    found = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("statistic"), str):
            raise ActionError(f"{where}[{i}]: expected an object with a string 'statistic'")
        change = item.get("change")
        if not _finite_or_null(change):
            raise ActionError(f"{where}[{i}].change: expected a finite number or null, got {json.dumps(change)[:80]}")
        found.append((item["statistic"], _number(change)))
    return tuple(found)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _finite_or_null(value: object) -> bool:
    return value is None or _finite(value)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def marker(change: Change) -> str:
    """The hidden first line naming an issue: its measurement (as a digest) and its first bad commit."""
    digest = hashlib.sha256("\0".join(change.measurement_key).encode("utf-8")).hexdigest()[:32]
    return f"{MARKER_PREFIX} measurement={digest} first-bad={change.first_bad} -->"


@dataclass(frozen=True)
class Links:
    server: str  # https://github.com
    repository: str  # owner/name
    run: str  # this workflow run's page
    artifact: str = ""  # this run's results artifact (results, HTML report, profile diffs)
    dashboard: str = ""  # the published history dashboard

    def compare(self, change: Change) -> str:
        return f"{self.server}/{self.repository}/compare/{change.last_good}...{change.first_bad}"


def code(text: str) -> str:
    return body.code(_CONTROLS.sub(" ", text))


def percent(fraction: float | None) -> str:
    return "unknown" if fraction is None else f"{fraction * 100:+.1f}%"


def _value(value: float | None, unit: str) -> str:
    """A level in its unit: nanoseconds and bytes scaled, anything else as given (a code span)."""
    if value is None:
        return "unknown"
    scales = {"ns": ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")),
              "bytes": ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1.0, "B"))}  # fmt: skip
    for factor, name in scales.get("bytes" if unit in ("B", "bytes") else unit, ()):
        if abs(value) >= factor or factor == 1.0:
            return f"{value / factor:.4g} {name}"
    return f"{value:.4g} {code(unit)}" if unit else f"{value:.4g}"


def title(change: Change) -> str:
    flat = _CONTROLS.sub(" ", f"{change.test}::{change.measurement} {change.statistic} [{change.device_class}]")
    size = f" {percent(change.change)}" if change.change is not None else ""
    text = f"Performance regression{size}: {' '.join(flat.split())} at {change.first_bad[:12]}"
    return text if len(text) <= TITLE_MAX else text[: TITLE_MAX - 1] + "…"


def _also(change: Change) -> str:
    found = " · ".join(f"{code(statistic)} {percent(size)}" for statistic, size in change.supporting)
    return found or "no other statistic"


def issue_body(change: Change, links: Links, recent: int) -> str:
    short = f"{change.last_good[:12]}...{change.first_bad[:12]}"
    p = f", p = {change.p_value:.2g}" if change.p_value is not None else ""
    interval = f"95% interval {percent(change.ci_low)} to {percent(change.ci_high)}{p}"
    series = " · ".join(code(s) for s in (change.test, change.measurement, change.statistic))
    shape = "a gradual creep over several commits, ending at" if change.gradual else "a step at"
    profile = [f"[the history dashboard]({links.dashboard}) (the series and its recorded profile diffs)"]
    if not links.dashboard:
        profile = []
    if links.artifact:
        profile.append(f"[this run's results, HTML report and profile diffs]({links.artifact})")
    lines = [
        marker(change),
        f"## Performance regression in {series}",
        "",
        f"**{percent(change.change)}** ({interval}): "
        f"{_value(change.before, change.unit)} → {_value(change.after, change.unit)}, {shape} "
        f"{code(change.first_bad[:12])}.",
        "",
        f"- **Commits:** [{code(short)}]({links.compare(change)}): last good {code(change.last_good)}, "
        f"first bad {code(change.first_bad)}",
        f"- **Series:** {series} on device class {code(change.device_class)}, branch {code(change.branch)}",
        f"- **Runs at the new level:** {change.runs_after}",
        f"- **Also seen in:** {_also(change)}",
        f"- **Profile diff:** {' · '.join(profile) if profile else 'none linked'}",
        "",
        f"Found by `gpuperf history changes` in [this workflow run]({links.run}); updated by each run while "
        f"the change is among the newest {recent} runs of its series. To find the commit by measurement, run "
        f"`gpuperf bisect {change.last_good[:12]} {change.first_bad[:12]} -- <the test>`. Close this issue once "
        "the regression is fixed or accepted.",
    ]
    return "\n".join(lines) + "\n"
