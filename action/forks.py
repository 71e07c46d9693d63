"""Whether a pull request's perf gate may run on a self-hosted runner, and the check that reports it.

``forks.py route`` (the ``route`` action, on a GitHub-hosted runner): a branch of this
repository is gated; a fork's pull request is gated only once a maintainer (owner,
member or collaborator) has approved it at its current head commit, so the code that
reaches the GPU machine is code someone with write access has read. A later push
needs a new approval. Outputs ``gate`` (true/false) and ``reason``.

``forks.py conclude`` (the ``check`` action, in a job that always runs): the check to
make required. It passes only when the gate ran and passed, and otherwise fails with
the reason, "not gated: fork pull request" included. A job skipped by ``if:`` would
count as passing for a required check; this one is never skipped. It fails rather
than ends neutral: a job cannot end neutral, and a fork's read-only token cannot
create a check run that would.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import workflow
from github_api import ApiError, from_env
from workflow import ActionError

MAINTAINERS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})


@dataclass(frozen=True)
class Route:
    gate: bool
    reason: str


def approver(reviews: Iterable[Mapping[str, Any]], head_sha: str) -> str | None:
    """A maintainer whose latest review of ``head_sha`` approves it (reviews in the API's order)."""
    latest: dict[str, Mapping[str, Any]] = {}
    for review in reviews:
        login = (review.get("user") or {}).get("login")
        if login and review.get("commit_id") == head_sha:
            latest[login] = review
    for login, review in latest.items():
        if review.get("state") == "APPROVED" and review.get("author_association") in MAINTAINERS:
            return str(login)
    return None


def route(
    event_name: str,
    payload: Mapping[str, Any],
    repository: str,
    reviews: Callable[[int], Iterable[Mapping[str, Any]]],
) -> Route:
    """Whether the gate runs for this event; ``reviews(number)`` is asked only for a fork."""
    if event_name == "pull_request_target":
        return Route(False, "not gated: pull_request_target would run the pull request's code with a write token")
    if event_name != "pull_request":
        return Route(True, f"{event_name} event: this repository's own code")
    pr = payload.get("pull_request") or {}
    head = pr.get("head") or {}
    head_repo = head.get("repo")
    if head_repo is not None and head_repo.get("full_name") == repository:
        return Route(True, "pull request from a branch of this repository")
    source = head_repo.get("full_name") if head_repo else "a deleted repository"
    sha = str(head.get("sha", ""))
    who = approver(reviews(int(pr["number"])), sha) if sha else None
    if who is not None:
        return Route(True, f"fork pull request from {source}, approved at {sha[:12]} by {who}")
    return Route(
        False,
        f"not gated: fork pull request from {source}. A fork's code runs on the self-hosted GPU runner only "
        f"after a maintainer approves the pull request at its head commit {sha[:12]}; then re-run this workflow.",
    )


def conclude(gate: str, reason: str, gate_result: str) -> tuple[bool, str]:
    """The required check's result from the route's decision and the gate job's result."""
    if gate == "false":
        return False, reason or "not gated"
    if gate != "true":
        return False, "the route job did not decide whether to gate (it failed or was cancelled; see its log)"
    messages = {
        "success": (True, "perf gate passed"),
        "failure": (False, "perf gate failed: see the gate job's summary and the pull-request comment"),
        "cancelled": (False, "perf gate cancelled (superseded by a newer push, or by hand)"),
        "skipped": (False, "perf gate skipped although the route allowed it"),
    }
    return messages.get(gate_result, (False, f"perf gate ended with result {gate_result or 'unknown'!r}"))


def main_route(env: Mapping[str, str]) -> int:
    try:
        event_name = workflow.require(env, "GITHUB_EVENT_NAME")
        payload = workflow.event(env)
        repository = workflow.require(env, "GITHUB_REPOSITORY")

        def reviews(number: int) -> Iterable[Mapping[str, Any]]:
            client = from_env(env, workflow.require(env, "GITHUB_TOKEN"))
            return client.paginate(f"/repos/{repository}/pulls/{number}/reviews?per_page=100")

        decision = route(event_name, payload, repository, reviews)
    except (ActionError, ApiError) as exc:
        print(workflow.annotation("error", f"cannot decide whether to gate: {exc}"))
        return 1
    workflow.set_outputs(env, {"gate": str(decision.gate).lower(), "reason": decision.reason})
    print(f"pytest-gpuperf: gate={str(decision.gate).lower()}: {decision.reason}")
    return 0


def main_conclude(env: Mapping[str, str]) -> int:
    ok, message = conclude(env.get("GATE", ""), env.get("REASON", ""), env.get("GATE_RESULT", ""))
    workflow.append_summary(env, f"## pytest-gpuperf check\n\n{'✅' if ok else '❌'} {message}\n")
    print(workflow.annotation("notice" if ok else "error", message))
    return 0 if ok else 1


def main(argv: list[str], env: Mapping[str, str]) -> int:
    if argv == ["route"]:
        return main_route(env)
    if argv == ["conclude"]:
        return main_conclude(env)
    print("usage: forks.py route | forks.py conclude", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.environ))
