"""The runner's side of a step: its environment, output and summary files, and annotations.

GitHub's runner hands a step its context through environment variables and files
(``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``) and reads annotations from lines such as
``::warning::text`` on standard output. Each function takes the environment as a
mapping, so the scripts run the same under a test as on a runner.
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class ActionError(Exception):
    """A problem in the action's inputs or context, worded for the workflow's author."""


def plugin_importable() -> None:
    """pytest-gpuperf's package from the checkout this script is in (the base's, never the artifact's)."""
    root = str(Path(__file__).resolve().parent.parent)
    if (Path(root) / "pytest_gpuperf").is_dir() and root not in sys.path:
        sys.path.insert(1, root)


def require(env: Mapping[str, str], name: str) -> str:
    """The variable ``name``, or ActionError naming it."""
    value = env.get(name, "")
    if not value:
        raise ActionError(f"the environment variable {name} is not set (it is set by the runner or action.yml)")
    return value


def event(env: Mapping[str, str]) -> dict[str, Any]:
    """The webhook payload of the event that started the run (``GITHUB_EVENT_PATH``)."""
    path = Path(require(env, "GITHUB_EVENT_PATH"))
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ActionError(f"cannot read the event payload {path}: {exc}") from None
    if not isinstance(payload, dict):
        raise ActionError(f"the event payload {path} is not a JSON object")
    return payload


def pull_request_number(event_name: str, payload: Mapping[str, Any]) -> int | None:
    """The pull request a run is about, or None for other events."""
    if event_name in ("pull_request", "pull_request_target"):
        number = payload.get("pull_request", {}).get("number")
        return number if isinstance(number, int) else None
    return None


def set_outputs(env: Mapping[str, str], values: Mapping[str, str]) -> None:
    """Append step outputs to ``GITHUB_OUTPUT`` (heredoc form: a value may hold any line)."""
    path = Path(require(env, "GITHUB_OUTPUT"))
    with path.open("a", encoding="utf-8") as f:
        for name, value in values.items():
            delimiter = f"gpuperf_{secrets.token_hex(8)}"
            f.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def append_summary(env: Mapping[str, str], text: str) -> bool:
    """Append Markdown to the job summary; False where the runner gave no summary file."""
    target = env.get("GITHUB_STEP_SUMMARY", "")
    if not target:
        return False
    with Path(target).open("a", encoding="utf-8") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    return True


def _escape(text: str) -> str:
    # The workflow-command encoding of a message: without it a newline ends the annotation.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def annotation(kind: str, message: str, title: str = "pytest-gpuperf") -> str:
    """A ``::warning`` / ``::error`` / ``::notice`` line for standard output."""
    if kind not in ("warning", "error", "notice"):
        raise ValueError(f"unknown annotation kind {kind!r}")
    return f"::{kind} title={_escape(title).replace(',', '%2C').replace(':', '%3A')}::{_escape(message)}"


def run_url(env: Mapping[str, str]) -> str:
    """The page of this workflow run (its artifacts are listed there)."""
    server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    return f"{server}/{require(env, 'GITHUB_REPOSITORY')}/actions/runs/{require(env, 'GITHUB_RUN_ID')}"
