"""Regression alerts: one GitHub issue per new regression change point of the performance history.

``alerts.py find`` (action.yml, after the suite ran with the history store in
``GPUPERF_HISTORY``): runs ``gpuperf history changes --format json --recent N`` with the
action's virtual environment and keeps its JSON as ``changes.json`` in the results folder,
so the artifact holds what the alerts were made from. The store's URL reaches the command
through the environment only, never its command line.

``alerts.py post`` (after the upload): for every regression whose first bad run is among
the newest N runs of its series, opens an issue, or updates the one it opened before. An
issue is this change point's only if its first line is the change point's marker (the
series key's digest and the first bad commit) and the token's own login wrote it: a rerun,
or the next night's run, edits the same issue instead of adding one. A closed alert stays
closed. The change points are data written from test names and metric names, so every
string goes into the issue as an inert code span (``body.code``), and commits must be hex.

A GitHub refusal (a token without ``issues: write``, a spent rate limit) is an error
annotation and a note in the job summary, never a failed job: the suite's result is the
job's result.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import body
import workflow
from github_api import ApiError, GitHub, from_env
from workflow import ActionError

FILE = "changes.json"
MARKER_PREFIX = "<!-- pytest-gpuperf-alert"
DEFAULT_RECENT = 3
TITLE_MAX = 256  # GitHub's limit for an issue title
_HASH = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_TEXT = ("test", "measurement", "statistic", "device_class", "branch", "unit")
_NUMBERS = ("change", "ci_low", "ci_high", "before", "after")
_KINDS = ("regression", "improvement")


@dataclass(frozen=True)
class Change:
    """One change point as ``gpuperf history changes --format json`` writes it."""

    test: str
    measurement: str
    statistic: str
    device_class: str
    branch: str
    unit: str
    last_good: str
    first_bad: str
    change: float
    ci_low: float
    ci_high: float
    before: float
    after: float
    p_value: float | None
    kind: str
    runs_after: int
    gradual: bool

    @property
    def series(self) -> tuple[str, ...]:
        return (self.test, self.measurement, self.statistic, self.device_class, self.branch)


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
    numbers: dict[str, Any] = {n: float(field(n, _finite, "a finite number")) for n in _NUMBERS}
    p_value = field("p_value", lambda v: v is None or _finite(v), "a finite number or null")
    return Change(
        **text,
        last_good=field("last_good", lambda v: isinstance(v, str) and _HASH.fullmatch(v), "a full commit hash"),
        first_bad=field("first_bad", lambda v: isinstance(v, str) and _HASH.fullmatch(v), "a full commit hash"),
        **numbers,
        p_value=None if p_value is None else float(p_value),
        kind=field("kind", lambda v: v in _KINDS, " or ".join(_KINDS)),
        runs_after=field("runs_after", _count, "a whole number >= 0"),
        gradual=field("gradual", lambda v: isinstance(v, bool), "true or false"),
    )


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def new_regressions(changes: Iterable[Change], recent: int) -> list[Change]:
    """The regressions whose first bad run is among the newest ``recent`` runs of their series."""
    return [c for c in changes if c.kind == "regression" and c.runs_after <= recent]


# --- the issue ------------------------------------------------------------------------------------


def marker(change: Change) -> str:
    """The hidden first line naming a change point: its series (as a digest) and its first bad commit."""
    digest = hashlib.sha256("\0".join(change.series).encode("utf-8")).hexdigest()[:32]
    return f"{MARKER_PREFIX} series={digest} first-bad={change.first_bad} -->"


@dataclass(frozen=True)
class Links:
    server: str  # https://github.com
    repository: str  # owner/name
    run: str  # this workflow run's page
    artifact: str = ""  # this run's results artifact (results, HTML report, profile diffs)
    dashboard: str = ""  # the published history dashboard

    def compare(self, change: Change) -> str:
        return f"{self.server}/{self.repository}/compare/{change.last_good}...{change.first_bad}"


def _code(text: str) -> str:
    return body.code(_CONTROLS.sub(" ", text))


def _percent(fraction: float) -> str:
    return f"{fraction * 100:+.1f}%"


def _value(value: float, unit: str) -> str:
    """A level in its unit: nanoseconds and bytes scaled, anything else as given (a code span)."""
    scales = {"ns": ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")),
              "bytes": ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1.0, "B"))}  # fmt: skip
    for factor, name in scales.get("bytes" if unit in ("B", "bytes") else unit, ()):
        if abs(value) >= factor or factor == 1.0:
            return f"{value / factor:.4g} {name}"
    return f"{value:.4g} {_code(unit)}" if unit else f"{value:.4g}"


def title(change: Change) -> str:
    flat = _CONTROLS.sub(" ", f"{change.test}::{change.measurement} {change.statistic} [{change.device_class}]")
    text = f"Performance regression {_percent(change.change)}: {' '.join(flat.split())} at {change.first_bad[:12]}"
    return text if len(text) <= TITLE_MAX else text[: TITLE_MAX - 1] + "…"


def issue_body(change: Change, links: Links, recent: int) -> str:
    short = f"{change.last_good[:12]}...{change.first_bad[:12]}"
    p = f", p = {change.p_value:.2g}" if change.p_value is not None else ""
    series = " · ".join(_code(s) for s in (change.test, change.measurement, change.statistic))
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
        f"**{_percent(change.change)}** (95% interval {_percent(change.ci_low)} to {_percent(change.ci_high)}{p}): "
        f"{_value(change.before, change.unit)} → {_value(change.after, change.unit)}, {shape} "
        f"{_code(change.first_bad[:12])}.",
        "",
        f"- **Commits:** [{_code(short)}]({links.compare(change)}): last good {_code(change.last_good)}, "
        f"first bad {_code(change.first_bad)}",
        f"- **Series:** {series} on device class {_code(change.device_class)}, branch {_code(change.branch)}",
        f"- **Runs at the new level:** {change.runs_after}",
        f"- **Profile diff:** {' · '.join(profile) if profile else 'none linked'}",
        "",
        f"Found by `gpuperf history changes` in [this workflow run]({links.run}); updated by each run while "
        f"the change is among the newest {recent} runs of its series. To find the commit by measurement, run "
        f"`gpuperf bisect {change.last_good[:12]} {change.first_bad[:12]} -- <the test>`. Close this issue once "
        "the regression is fixed or accepted.",
    ]
    return "\n".join(lines) + "\n"


# --- posting ------------------------------------------------------------------------------------


def is_alert(issue: Mapping[str, Any], mark: str, author: str) -> bool:
    """Whether ``issue`` is the alert of ``mark``, opened by ``author`` (a pull request never is)."""
    if "pull_request" in issue:
        return False
    user = issue.get("user") or {}
    text = issue.get("body") or ""
    return user.get("login") == author and text.split("\n", 1)[0].strip() == mark


@dataclass(frozen=True)
class Posted:
    change: Change
    action: str  # "created", "updated", "unchanged", "closed" (an alert closed earlier: left alone)
    number: int
    url: str


def list_path(repo: str, label: str) -> str:
    labels = f"&labels={_query(label)}" if label else ""
    return f"/repos/{repo}/issues?state=all&per_page=100{labels}"


def _query(text: str) -> str:
    import urllib.parse

    return urllib.parse.quote(text, safe="")


def post(
    client: GitHub, repo: str, changes: Sequence[Change], links: Links, recent: int, label: str
) -> tuple[list[Posted], ApiError | None]:
    """Open or update one issue per change point; the first refusal stops it and is returned."""
    done: list[Posted] = []
    try:
        author = client.viewer_login()
        issues = list(client.paginate(list_path(repo, label)))
        for change in changes:
            mark = marker(change)
            existing = next((i for i in issues if is_alert(i, mark, author)), None)
            done.append(_post_one(client, repo, change, existing, links, recent, label))
    except ApiError as exc:
        return done, exc
    return done, None


def _post_one(client: GitHub, repo: str, change: Change, existing: Mapping[str, Any] | None, links: Links,
              recent: int, label: str) -> Posted:  # fmt: skip
    text, name = issue_body(change, links, recent), title(change)
    if existing is not None:
        number, url = existing["number"], existing.get("html_url", "")
        if existing.get("state") == "closed":
            return Posted(change, "closed", number, url)
        if existing.get("body") == text and existing.get("title") == name:
            return Posted(change, "unchanged", number, url)
        reply = client.request("PATCH", f"/repos/{repo}/issues/{number}", {"title": name, "body": text})
        return Posted(change, "updated", number, reply.data.get("html_url", url))
    payload: dict[str, Any] = {"title": name, "body": text}
    if label:
        payload["labels"] = [label]
    reply = client.request("POST", f"/repos/{repo}/issues", payload)
    return Posted(change, "created", reply.data["number"], reply.data.get("html_url", ""))


def is_rate_limit(exc: ApiError) -> bool:
    """GitHub's primary (remaining 0) or secondary rate limit: 403 or 429 with its headers or message."""
    headers = {k.lower(): v for k, v in exc.headers.items()}
    return exc.status in (403, 429) and (
        headers.get("x-ratelimit-remaining") == "0" or "retry-after" in headers or "rate limit" in exc.message.lower()
    )


def refusal_message(exc: ApiError, pending: int) -> str:
    """What a refused call means for the alerts, in words for the workflow's author."""
    if is_rate_limit(exc):
        headers = {k.lower(): v for k, v in exc.headers.items()}
        when = ""
        if headers.get("x-ratelimit-reset", "").isdigit():
            import datetime

            reset = datetime.datetime.fromtimestamp(int(headers["x-ratelimit-reset"]), datetime.timezone.utc)
            when = f" until {reset:%Y-%m-%d %H:%M} UTC"
        elif headers.get("retry-after", "").isdigit():
            when = f" for {headers['retry-after']} s"
        return (
            f"GitHub's API rate limit stops the regression alerts{when} (HTTP {exc.status}: {exc.message}); "
            f"{pending} alert(s) were not opened or updated. They are listed in the job summary; "
            "the next run opens them."
        )
    if exc.status in (401, 403, 404):
        return (
            f"The regression alerts were not posted: the token may not write issues (HTTP {exc.status}: "
            f"{exc.message}). Give the job `permissions: issues: write`."
        )
    return f"The regression alerts failed: {exc}"


# --- the steps ------------------------------------------------------------------------------------


def _recent(env: Mapping[str, str]) -> int:
    text = env.get("RECENT", "").strip() or str(DEFAULT_RECENT)
    if not text.isdigit() or int(text) < 1:
        raise ActionError(f"the alert-recent-runs input must be a whole number >= 1, got {text!r}")
    return int(text)


def changes_command(gpuperf: str, recent: int, output: Path) -> list[str]:
    """``gpuperf history changes``: the store comes from GPUPERF_HISTORY, never the command line."""
    return [gpuperf, "history", "changes", "--format", "json", "--recent", str(recent), "--output", str(output)]


def main_find(env: Mapping[str, str]) -> int:
    try:
        results = Path(workflow.require(env, "RESULTS_DIR"))
        gpuperf = workflow.require(env, "GPUPERF")
        workflow.require(env, "GPUPERF_HISTORY")
        recent = _recent(env)
    except ActionError as exc:
        print(workflow.annotation("error", f"no change points: {exc}"))
        return 0
    command = changes_command(gpuperf, recent, results / FILE)
    print("pytest-gpuperf:", " ".join(command), flush=True)
    done = subprocess.run(command, env=dict(env), check=False)
    if done.returncode not in (0, 1):  # 1: a new regression, which the post step turns into issues
        (results / FILE).unlink(missing_ok=True)
        message = f"gpuperf history changes exited {done.returncode}: no change points, no alerts (see the log above)"
        print(workflow.annotation("error", message))
        workflow.append_summary(env, f"\n> [!CAUTION]\n> {message}\n")
    return 0


def summary(posted: Sequence[Posted], found: Sequence[Change], recent: int) -> str:
    lines = [f"\n### Performance history: {len(found)} new regression(s) in the newest {recent} runs\n"]
    by_change = {id(p.change): p for p in posted}
    for change in found:
        done = by_change.get(id(change))
        what = f"issue #{done.number} {done.action}" if done else "no issue (see the note below)"
        lines.append(f"- {_code(change.test)} {_code(change.statistic)} {_percent(change.change)} at "
                     f"{_code(change.first_bad[:12])}: {what}")  # fmt: skip
    return "\n".join(lines) + "\n"


def main_post(env: Mapping[str, str]) -> int:
    try:
        results = Path(workflow.require(env, "RESULTS_DIR"))
        recent = _recent(env)
        path = results / FILE
        if not path.is_file():
            print(f"pytest-gpuperf: no {path}: no change points to alert on")
            return 0
        found = new_regressions(parse_changes(path.read_text(encoding="utf-8"), str(path)), recent)
        links = Links(
            server=(env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
            repository=_repository(env),
            run=workflow.run_url(env),
            artifact=env.get("ARTIFACT_URL", ""),
            dashboard=env.get("DASHBOARD_URL", "").strip(),
        )
        if not found:
            print(f"pytest-gpuperf: no new regression change point in the newest {recent} runs")
            workflow.append_summary(env, summary([], [], recent))
            return 0
        client = from_env(env, workflow.require(env, "GITHUB_TOKEN"))
    except ActionError as exc:
        print(workflow.annotation("error", f"no regression alerts: {exc}"))
        return 0
    posted, refused = post(client, links.repository, found, links, recent, env.get("LABEL", "").strip())
    note = refusal_message(refused, len(found) - len(posted)) if refused is not None else ""
    for done in posted:
        print(f"pytest-gpuperf: alert {done.action}: #{done.number} {done.url}")
    workflow.append_summary(env, summary(posted, found, recent) + (f"\n> [!WARNING]\n> {note}\n" if note else ""))
    if note:
        print(workflow.annotation("error", note))
    return 0


def _repository(env: Mapping[str, str]) -> str:
    name = workflow.require(env, "GITHUB_REPOSITORY")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", name):
        raise ActionError(f"GITHUB_REPOSITORY {name!r} is not owner/name")
    return name


def main(argv: list[str], env: Mapping[str, str]) -> int:
    if argv == ["find"]:
        return main_find(env)
    if argv == ["post"]:
        return main_post(env)
    print("usage: alerts.py find | alerts.py post", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.environ))
