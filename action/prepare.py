"""Before the gate: the comment key, the results folder, the base commit, the pip cache key.

Run by action.yml after the checkout. It fetches the one base commit the gate compares
against (not the whole history), writes ``gate.json`` with no exit code yet, and sets
the step outputs ``key``, ``slug``, ``results-dir``, ``venv``, ``base-ref`` (what
``--gpuperf-compare-ref`` gets), ``cache-key``, ``cache-prefix`` and ``flow``.

``flow`` is ``gate`` (the pull-request gate, compare-ref against a base) or, with the
``history`` input, ``history`` for a push to the default branch, a scheduled run and a
manual run on the default branch without a base-ref: the suite is recorded in the store
named by ``GPUPERF_HISTORY`` and regressions become issues (alerts.py). No base is fetched then.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import record
import workflow
from workflow import ActionError

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# A branch or tag name as the base-ref input may give it (git check-ref-format, narrowed).
_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/+-]*")


def comment_key(explicit: str, job: str, matrix_json: str) -> str:
    """The key that names a job's sticky comment: the input, else the job id and matrix values.

    ``matrix_json`` is ``toJSON(matrix)``: ``null`` outside a matrix. Two jobs of one
    matrix differ in some value, so their keys differ.
    """
    key = " ".join(explicit.split())
    if not key:
        key = _job_key(job, matrix_json)
    if len(key) > record.KEY_MAX:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
        key = key[: record.KEY_MAX - 17] + "~" + digest
    return key


def _job_key(job: str, matrix_json: str) -> str:
    if not job:
        raise ActionError("GITHUB_JOB is not set: give the action a comment-key")
    try:
        matrix = json.loads(matrix_json) if matrix_json.strip() else None
    except ValueError:
        raise ActionError(f"the matrix context is not JSON: {matrix_json[:80]!r}") from None
    if not isinstance(matrix, dict) or not matrix:
        return job
    values = ", ".join(f"{name}={_matrix_value(matrix[name])}" for name in sorted(matrix))
    return f"{job} ({values})"


def _matrix_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def slug(key: str) -> str:
    """A file and artifact name for ``key``: readable, and distinct for distinct keys."""
    readable = re.sub(r"[^a-z0-9._-]+", "-", key.lower()).strip("-.")[:60] or "gate"
    return f"{readable}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:8]}"


@dataclass(frozen=True)
class Base:
    refspec: str  # what `git fetch origin` is given
    compare_ref: str  # what --gpuperf-compare-ref is given, once fetched


GATE, HISTORY = "gate", "history"
HISTORY_ENV = "GPUPERF_HISTORY"


def flow(event_name: str, payload: Mapping[str, Any], ref: str, history: bool, explicit_base: str) -> str:
    """``history`` for the runs that build the performance history, else ``gate``."""
    if not history or event_name not in ("push", "schedule", "workflow_dispatch"):
        return GATE
    if event_name == "schedule":  # runs on the default branch
        return HISTORY
    default = (payload.get("repository") or {}).get("default_branch")
    on_default = isinstance(default, str) and bool(default) and ref == f"refs/heads/{default}"
    if event_name == "push":
        return HISTORY if on_default else GATE
    return HISTORY if on_default and not explicit_base.strip() else GATE  # a manual nightly


def base(event_name: str, payload: Mapping[str, Any], explicit: str) -> Base:
    """The commit to compare against: the base-ref input, else the event's base commit."""
    explicit = explicit.strip()
    if explicit:
        return _explicit_base(explicit)
    if event_name == "pull_request":
        pr = payload.get("pull_request") or {}
        return _named_base(pr.get("base", {}).get("sha"), pr.get("base", {}).get("ref"), "pull_request.base")
    if event_name == "merge_group":
        group = payload.get("merge_group") or {}
        name = str(group.get("base_ref", "")).removeprefix("refs/heads/")
        return _named_base(group.get("base_sha"), name, "merge_group")
    raise ActionError(
        f"a {event_name} event has no base to compare against: give the action a base-ref "
        "(a branch, refs/tags/<tag>, or a commit SHA)"
    )


def _named_base(sha: object, name: object, where: str) -> Base:
    if not isinstance(sha, str) or not _SHA.fullmatch(sha) or not isinstance(name, str) or not name:
        raise ActionError(f"the event payload has no base commit and branch in {where}")
    # The commit the event names, under the branch's usual name: the comment reads "against origin/main".
    return Base(refspec=f"+{sha}:refs/remotes/origin/{name}", compare_ref=f"origin/{name}")


def _explicit_base(ref: str) -> Base:
    if _SHA.fullmatch(ref):
        return Base(refspec=ref, compare_ref=ref)
    if not _REF.fullmatch(ref) or ".." in ref or ref.endswith(("/", ".lock")) or "//" in ref:
        raise ActionError(f"base-ref {ref!r} is not a branch, refs/tags/<tag> or full commit SHA")
    if ref.startswith("refs/tags/"):
        return Base(refspec=f"+{ref}:{ref}", compare_ref=ref)
    branch = ref.removeprefix("refs/heads/")
    return Base(refspec=f"+refs/heads/{branch}:refs/remotes/origin/{branch}", compare_ref=f"origin/{branch}")


def _git(args: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


def auth_env(token: str, server_url: str, cwd: Path) -> dict[str, str]:
    """Variables that give one git command the token as an HTTP header, never written to .git/config.

    Empty where there is no token, or where the checkout already keeps one (two
    Authorization headers make GitHub refuse the fetch).
    """
    header_key = f"http.{server_url.rstrip('/')}/.extraheader"
    if not token or _git(["config", "--get-all", header_key], cwd).stdout.strip():
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": header_key,
        "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
    }


def fetch_base(target: Base, cwd: Path, extra_env: Mapping[str, str]) -> None:
    """Fetch the base commit alone into a shallow checkout; without --depth into a full one."""
    shallow = _git(["rev-parse", "--is-shallow-repository"], cwd)
    if shallow.returncode != 0:
        raise ActionError(f"{cwd} is not a git checkout: {shallow.stderr.strip()}")
    depth = ["--depth=1"] if shallow.stdout.strip() == "true" else []
    env = {**os.environ, **extra_env, "GIT_TERMINAL_PROMPT": "0"}
    done = _git(["fetch", "--no-tags", "--no-recurse-submodules", *depth, "origin", target.refspec], cwd, env)
    if done.returncode != 0:
        raise ActionError(f"could not fetch the base {target.refspec!r} from origin: {done.stderr.strip()}")


def job_id(env: Mapping[str, str]) -> int | None:
    """This job's id (``job.check_run_id``, as JOB_ID), or None where the runner does not give it."""
    raw = env.get("JOB_ID", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def cache_key(install: str, python_version: str, pyproject: bytes, runner_os: str, arch: str) -> tuple[str, str]:
    """The pip cache's key and restore prefix: the install command, Python and pytest-gpuperf's dependencies."""
    prefix = f"gpuperf-pip-{runner_os}-{arch}-py{python_version}-".lower()
    digest = hashlib.sha256(install.encode("utf-8") + b"\0" + pyproject).hexdigest()[:20]
    return prefix + digest, prefix


def main(env: Mapping[str, str]) -> int:
    try:
        outputs = prepare(env)
    except ActionError as exc:
        print(workflow.annotation("error", str(exc)))
        return 1
    workflow.set_outputs(env, outputs)
    if outputs["flow"] == HISTORY:
        print(f"pytest-gpuperf: recording the suite in the performance history ({outputs['key']!r})")
    else:
        print(f"pytest-gpuperf: comment key {outputs['key']!r}, comparing against {outputs['base-ref']}")
    return 0


def prepare(env: Mapping[str, str]) -> dict[str, str]:
    event_name = workflow.require(env, "GITHUB_EVENT_NAME")
    if event_name == "pull_request_target":
        raise ActionError(
            "pull_request_target runs with a write token and the base's code; the gate measures a pull "
            "request's code, so run it on pull_request (docs/action.md: comments for forks)"
        )
    payload = workflow.event(env)
    key = comment_key(env.get("INPUT_COMMENT_KEY", ""), env.get("GITHUB_JOB", ""), env.get("MATRIX", ""))
    name = slug(key)
    temp = Path(workflow.require(env, "RUNNER_TEMP"))
    results = temp / f"gpuperf-{name}"
    history = env.get("INPUT_HISTORY", "false").strip().lower() == "true"
    chosen = flow(event_name, payload, env.get("GITHUB_REF", ""), history, env.get("INPUT_BASE_REF", ""))
    if chosen == HISTORY:
        if not env.get(HISTORY_ENV, "").strip():
            raise ActionError(
                f"history: true needs the store's URL in the environment variable {HISTORY_ENV}, from a "
                f"secret: env: {HISTORY_ENV}: ${{{{ secrets.{HISTORY_ENV} }}}} (docs/action.md)"
            )
        target = Base(refspec="", compare_ref="")
    else:
        target = base(event_name, payload, env.get("INPUT_BASE_REF", ""))
        workspace = Path(env.get("GITHUB_WORKSPACE") or ".")
        server = env.get("GITHUB_SERVER_URL") or "https://github.com"
        fetch_base(target, workspace, auth_env(env.get("GITHUB_TOKEN", ""), server, workspace))
    number = workflow.pull_request_number(event_name, payload)
    gate = record.GateRecord(key, number, exit_code=None, compare_ref=target.compare_ref, job_id=job_id(env))
    record.write(results, gate)
    pyproject = Path(env.get("GITHUB_ACTION_PATH") or Path(__file__).parents[1]) / "pyproject.toml"
    version = "{}.{}".format(*sys.version_info[:2])
    key_full, prefix = cache_key(
        env.get("INPUT_INSTALL", ""),
        version,
        pyproject.read_bytes() if pyproject.is_file() else b"",
        env.get("RUNNER_OS", platform.system()),
        env.get("RUNNER_ARCH", platform.machine()),
    )
    return {
        "key": key,
        "slug": name,
        "results-dir": str(results),
        "venv": str(temp / f"gpuperf-venv-{name}"),
        "base-ref": target.compare_ref,
        "cache-key": key_full,
        "cache-prefix": prefix,
        "flow": chosen,
    }


if __name__ == "__main__":
    sys.exit(main(os.environ))
