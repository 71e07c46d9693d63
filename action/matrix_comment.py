"""One sticky comment and one job summary for every job of a GPU matrix (action/matrix/action.yml).

Run in a job that needs the matrix's gate jobs and runs after them whatever their result
(``if: always()``), with their artifacts downloaded under ``ARTIFACTS``. It:

1. reads each artifact's ``gate.json`` and ``results.json`` as data: the results through
   pytest-gpuperf's own reader (bounded, schema-checked), from the checkout beside this script;
2. asks GitHub for this run attempt's jobs and keeps the gate's (named ``GATE_JOB``, or
   ``GATE_JOB (...)`` in a matrix): a job that left no artifact (cancelled, failed before its
   upload) becomes a column saying how it ended, matched by the job id its ``gate.json`` records;
3. renders the one comment (``pytest_gpuperf.report.matrix``, as ``gpuperf comment`` does), writes
   it to the job summary and, on a pull request whose head is still this run's, posts or updates
   the sticky comment of ``COMMENT_KEY``.

Every failure to reach GitHub is a warning, never a failed job: the gate jobs decide the checks.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import body
import comment
import record
import workflow
from github_api import ApiError, GitHub, from_env
from workflow import ActionError

if TYPE_CHECKING:
    from pytest_gpuperf.report.matrix import Job

NOT_RUN = "not run"  # the gate's pytest never started (its prepare or install step failed)
UNREADABLE = "unreadable results"


@dataclass(frozen=True)
class Artifact:
    """One gate job's downloaded artifact: its record and its results (None: it holds none, or unreadable)."""

    folder: Path
    gate: record.GateRecord
    job: Job


def _ended(gate: record.GateRecord, has_results: bool) -> str | None:
    """How a gate job ended, where its column must say so: pytest never ran, or ended other than pass or fail."""
    if gate.exit_code is None:
        return NOT_RUN
    if gate.exit_code in (0, 1) and has_results:
        return None
    return f"pytest exit code {gate.exit_code}"


def read_artifacts(folder: Path) -> list[Artifact]:
    """Each gate artifact under ``folder`` (a folder holding ``gate.json``); a bad one is an error annotation."""
    workflow.plugin_importable()
    from pytest_gpuperf.errors import GpuperfError
    from pytest_gpuperf.report.matrix import Job
    from pytest_gpuperf.report.results_json import load_results

    found = []
    for gate_file in sorted(folder.glob(f"*/{record.FILE}")):
        here = gate_file.parent
        try:
            gate = record.load(here)
        except ActionError as exc:
            print(workflow.annotation("error", f"{here.name}: {exc}"))
            continue
        results = here / comment.RESULTS
        session, ended = None, None
        if results.is_file() and not results.is_symlink():
            try:
                session = load_results(results)
            except GpuperfError as exc:
                print(workflow.annotation("error", f"{here.name}: {exc}"))
                ended = UNREADABLE
        job = Job(gate.key, session, ended or _ended(gate, session is not None))
        found.append(Artifact(here, gate, job))
    return found


def gate_jobs(jobs: Iterable[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    """The jobs of the gate: named ``name``, or ``name (...)`` as GitHub names a matrix's jobs."""
    return [j for j in jobs if j.get("name") == name or str(j.get("name", "")).startswith(f"{name} (")]


def columns(artifacts: Sequence[Artifact], jobs: Sequence[Mapping[str, Any]]) -> list[Job]:
    """A column per artifact, and one per gate job that left none, saying how it ended."""
    from pytest_gpuperf.report.matrix import Job

    seen = {a.gate.job_id for a in artifacts if a.gate.job_id is not None}
    missing = [
        Job(str(j.get("name")), None, str(j.get("conclusion") or j.get("status") or "unknown"))
        for j in jobs if j.get("id") not in seen
    ]  # fmt: skip
    return [a.job for a in artifacts] + missing


def list_jobs(client: GitHub, env: Mapping[str, str], repo: str) -> list[Mapping[str, Any]]:
    run = workflow.require(env, "GITHUB_RUN_ID")
    attempt = env.get("GITHUB_RUN_ATTEMPT") or "1"
    return list(client.paginate_key(f"/repos/{repo}/actions/runs/{run}/attempts/{attempt}/jobs?per_page=100", "jobs"))


def render(jobs: Sequence[Job], key: str, link: str, *, limit: int, size: body.Measure) -> str:
    from pytest_gpuperf.report.matrix import render_matrix

    return render_matrix(jobs, link=link, marker=body.marker(key), limit=limit, size=size)


def still_the_head(client: GitHub, repo: str, number: int, payload: Mapping[str, Any]) -> bool:
    """Whether pull request ``number`` still has this run's head commit: after a newer push, its run posts."""
    head = ((payload.get("pull_request") or {}).get("head") or {}).get("sha")
    return isinstance(head, str) and comment.verified_pull_request(client, repo, number, head)


def main(env: Mapping[str, str]) -> int:
    try:
        repo = comment.repository(env)
        folder = Path(workflow.require(env, "ARTIFACTS"))
        gate_job = workflow.require(env, "GATE_JOB")
        key = " ".join(env.get("COMMENT_KEY", "").split()) or f"{gate_job} matrix"
        client = from_env(env, workflow.require(env, "GITHUB_TOKEN"))
        link = workflow.run_url(env)
    except ActionError as exc:
        print(workflow.annotation("error", str(exc)))
        return 1
    artifacts = read_artifacts(folder) if folder.is_dir() else []
    try:
        jobs = gate_jobs(list_jobs(client, env, repo), gate_job)
    except ApiError as exc:
        print(workflow.annotation("warning", f"the matrix jobs' results are unknown (give the job `permissions: "
                                  f"actions: read`): {exc}"))  # fmt: skip
        jobs = []
    shown = columns(artifacts, jobs)
    if not shown:
        print(workflow.annotation("warning", f"no gate job named {gate_job!r} and no gpuperf artifact in this run"))
        return 0
    workflow.append_summary(env, render(shown, key, link, limit=body.SUMMARY_LIMIT, size=body.utf8_bytes))
    if env.get("COMMENT", "true").strip().lower() != "true":
        return 0
    return _post(client, env, repo, key, render(shown, key, link, limit=body.COMMENT_LIMIT, size=body.utf16_units))


def _post(client: GitHub, env: Mapping[str, str], repo: str, key: str, text: str) -> int:
    """The sticky comment, on the run's pull request; every failure a warning and a summary note."""
    try:
        payload = workflow.event(env)
        number = workflow.pull_request_number(env.get("GITHUB_EVENT_NAME", ""), payload)
        if number is None:
            print(f"pytest-gpuperf: a {env.get('GITHUB_EVENT_NAME', '?')} event has no pull request to comment on")
            return 0
        if not still_the_head(client, repo, number, payload):
            print(workflow.annotation("notice", f"pull request #{number} has a newer head: its own run comments"))
            return 0
        done = comment.post_text(client, repo, number, key, text)
    except ApiError as exc:
        message = _cannot_write(exc) if exc.status in (401, 403, 404) else f"The matrix comment failed: {exc}"
        print(workflow.annotation("warning", message))
        workflow.append_summary(env, f"\n> [!WARNING]\n> {message}\n")
        return 0
    except ActionError as exc:
        print(workflow.annotation("warning", f"no matrix comment: {exc}"))
        return 0
    print(f"pytest-gpuperf: matrix comment {done.action} ({done.comment_id}) {done.url}")
    return 0


def _cannot_write(exc: ApiError) -> str:
    return (
        f"The matrix comment was not posted: the token may not write to this pull request (HTTP {exc.status}: "
        f"{exc.message}). Give the job `permissions: pull-requests: write`; a fork's pull request runs with a "
        "read-only token, and the job summary holds the same text."
    )


if __name__ == "__main__":
    sys.exit(main(os.environ))
