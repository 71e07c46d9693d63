"""One sticky pull-request comment per comment key: found by marker and author, then edited.

``comment.py post`` (action.yml, after the upload): reads the results folder and posts
or updates this job's comment. A comment counts as this job's only if its first line
is the key's marker and the token's own login wrote it: anyone can paste a marker into
a comment of their own. A token that may not write (a fork's pull request gets a
read-only one) turns into a warning and a note in the job summary, never a failed job:
the gate's result is the job's result.

``comment.py from-artifacts DIR`` (``.github/workflows/gpuperf-comment.yml``, on
``workflow_run``): posts the comments of a finished run from its downloaded artifacts,
with the base repository's token. The artifacts were written by the pull request's
code, so each claims a pull request that must have the run's head commit as its head,
and nothing of their text is posted: the comment is rebuilt from the results data
(``results.json``, schema-checked, rendered and sanitised by pytest-gpuperf's own
report code from the checkout beside this script), and its outcome line is GitHub's
conclusion of the workflow run (``RUN_CONCLUSION``), not the artifact's exit code.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import body
import record
import workflow
from github_api import ApiError, GitHub, from_env
from workflow import ActionError

_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_CONCLUSION = re.compile(r"[a-z_]{1,32}")
RESULTS = "results.json"  # run_gate.py's --gpuperf-json


def is_sticky(comment: Mapping[str, Any], marker: str, author: str) -> bool:
    """Whether ``comment`` is the sticky comment of ``marker``'s key, written by ``author``."""
    user = comment.get("user") or {}
    text = comment.get("body") or ""
    return user.get("login") == author and text.split("\n", 1)[0].strip() == marker


def find_sticky(comments: Iterable[Mapping[str, Any]], marker: str, author: str) -> Mapping[str, Any] | None:
    """The oldest comment that is the sticky one (the list is in creation order)."""
    return next((c for c in comments if is_sticky(c, marker, author)), None)


@dataclass(frozen=True)
class Plan:
    action: str  # "create", "update" or "unchanged"
    comment_id: int | None = None


def plan(existing: Mapping[str, Any] | None, text: str) -> Plan:
    if existing is None:
        return Plan("create")
    if existing.get("body") == text:
        return Plan("unchanged", existing["id"])
    return Plan("update", existing["id"])


@dataclass(frozen=True)
class Posted:
    action: str
    comment_id: int
    url: str


def repository(env: Mapping[str, str]) -> str:
    name = workflow.require(env, "GITHUB_REPOSITORY")
    if not _REPOSITORY.fullmatch(name):
        raise ActionError(f"GITHUB_REPOSITORY {name!r} is not owner/name")
    return name


def post(client: GitHub, repo: str, number: int, outcome: body.Outcome) -> Posted:
    """Create this key's comment on pull request ``number``, or update the one there."""
    return post_text(client, repo, number, outcome.key, body.comment_body(outcome))


def post_text(client: GitHub, repo: str, number: int, key: str, text: str) -> Posted:
    """Create ``key``'s comment (``text``, whose first line is the key's marker) on ``number``, or update it."""
    author = client.viewer_login()
    comments = client.paginate(f"/repos/{repo}/issues/{number}/comments?per_page=100")
    step = plan(find_sticky(comments, body.marker(key), author), text)
    if step.action == "create":
        reply = client.request("POST", f"/repos/{repo}/issues/{number}/comments", {"body": text})
    elif step.action == "update":
        reply = client.request("PATCH", f"/repos/{repo}/issues/comments/{step.comment_id}", {"body": text})
    else:
        assert step.comment_id is not None
        return Posted("unchanged", step.comment_id, "")
    return Posted(step.action, reply.data["id"], reply.data.get("html_url", ""))


def _cannot_write(exc: ApiError) -> str:
    return (
        f"The pull-request comment was not posted: the token may not write to this pull request "
        f"(HTTP {exc.status}: {exc.message}). A fork's pull request runs with a read-only token; "
        "the gpuperf-comment workflow (docs/action.md) posts the comment from this run's artifact. "
        "On a branch of this repository, give the job `permissions: pull-requests: write`."
    )


def main_post(env: Mapping[str, str]) -> int:
    """The action's comment step; every failure is a warning (the gate decides the job)."""
    try:
        results = Path(workflow.require(env, "RESULTS_DIR"))
        gate = record.load(results)
        if gate.pull_request is None:
            print(f"pytest-gpuperf: a {env.get('GITHUB_EVENT_NAME', '?')} event has no pull request to comment on")
            return 0
        link = env.get("ARTIFACT_URL") or workflow.run_url(env)
        outcome = body.Outcome(gate.key, gate.exit_code, record.report(results), link)
        client = from_env(env, workflow.require(env, "GITHUB_TOKEN"))
        done = post(client, repository(env), gate.pull_request, outcome)
    except ApiError as exc:
        message = _cannot_write(exc) if exc.status in (401, 403, 404) else f"The pull-request comment failed: {exc}"
        print(workflow.annotation("warning", message))
        workflow.append_summary(env, f"\n> [!WARNING]\n> {message}\n")
        return 0
    except ActionError as exc:
        print(workflow.annotation("warning", f"no pull-request comment: {exc}"))
        return 0
    print(f"pytest-gpuperf: comment {done.action} ({done.comment_id}) {done.url}")
    return 0


def verified_pull_request(client: GitHub, repo: str, number: int, head_sha: str) -> bool:
    """Whether pull request ``number`` has ``head_sha`` as its head, as GitHub says, not the artifact."""
    pull = client.request("GET", f"/repos/{repo}/pulls/{number}").data
    return isinstance(pull, dict) and (pull.get("head") or {}).get("sha") == head_sha


def main_from_artifacts(env: Mapping[str, str], folder: Path) -> int:
    """Post the comment of each artifact under ``folder``; 1 if any could not be posted."""
    try:
        repo = repository(env)
        head_sha = workflow.require(env, "HEAD_SHA")
        link = workflow.require(env, "RUN_URL")
        conclusion = workflow.require(env, "RUN_CONCLUSION")
        if not _CONCLUSION.fullmatch(conclusion):
            raise ActionError(f"RUN_CONCLUSION {conclusion!r} is not a workflow run's conclusion")
        client = from_env(env, workflow.require(env, "GITHUB_TOKEN"))
    except ActionError as exc:
        print(workflow.annotation("error", str(exc)))
        return 1
    failed = 0
    gates = sorted(p.parent for p in folder.glob(f"*/{record.FILE}"))
    if not gates:
        print(f"pytest-gpuperf: no {record.FILE} under {folder}: nothing to post")
    for results in gates:
        try:
            _post_artifact(client, repo, results, head_sha, link, conclusion)
        except (ActionError, ApiError) as exc:
            print(workflow.annotation("error", f"{results.name}: {exc}"))
            failed += 1
    return 1 if failed else 0


def _post_artifact(client: GitHub, repo: str, results: Path, head_sha: str, link: str, conclusion: str) -> None:
    gate = record.load(results)
    if gate.pull_request is None:
        print(f"pytest-gpuperf: {results.name}: not a pull request's run")
        return
    if not verified_pull_request(client, repo, gate.pull_request, head_sha):
        # A newer push moved the head (a later run posts), or the artifact names another PR.
        stale = f"{results.name}: pull request #{gate.pull_request} does not have {head_sha[:12]} as its head"
        print(workflow.annotation("notice", stale + "; not posted"))
        return
    report = rebuilt_report(results)  # the artifact's comment.md is the pull request's text: never posted
    outcome = body.Outcome(gate.key, None, report, link, verdict=body.run_line(conclusion))
    done = post(client, repo, gate.pull_request, outcome)
    print(f"pytest-gpuperf: {results.name}: comment {done.action} ({done.comment_id}) {done.url}")


def rebuilt_report(results: Path) -> str | None:
    """The comment's report rendered from the artifact's results data (None: it holds none).

    pytest-gpuperf's own reader bounds the read (``results_json.MAX_BYTES``) and checks the file
    against its schema, and its Markdown renderer makes every string from the tests inert, as in
    the plugin's comment. ActionError names the file and the JSON path of a bad one.
    """
    path = results / RESULTS
    if not path.is_file() or path.is_symlink():
        return None
    workflow.plugin_importable()
    from pytest_gpuperf.errors import GpuperfError
    from pytest_gpuperf.report.markdown import render_comment
    from pytest_gpuperf.report.results_json import load_results

    try:
        session = load_results(path)
    except GpuperfError as exc:
        raise ActionError(str(exc)) from None
    return render_comment(session)


def main(argv: list[str], env: Mapping[str, str]) -> int:
    if argv[:1] == ["post"] and len(argv) == 1:
        return main_post(env)
    if argv[:1] == ["from-artifacts"] and len(argv) == 2:
        return main_from_artifacts(env, Path(argv[1]))
    print("usage: comment.py post | comment.py from-artifacts DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.environ))
