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
closed. The change points and the issue's text: alert_text.py.

A GitHub refusal (a token without ``issues: write``, a spent rate limit) is an error
annotation and a note in the job summary, never a failed job: the suite's result is the
job's result.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import workflow
from alert_text import Change, Links, code, issue_body, marker, new_regressions, parse_changes, percent, title
from github_api import ApiError, GitHub, from_env
from workflow import ActionError

FILE = "changes.json"
DEFAULT_RECENT = 3


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
        lines.append(f"- {code(change.test)} {code(change.statistic)} {percent(change.change)} at "
                     f"{code(change.first_bad[:12])}: {what}")  # fmt: skip
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
