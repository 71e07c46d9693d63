"""The job summary: the gate's outcome and report on the run's page, for every event.

Run by action.yml after the upload (to link the artifact), whether or not pytest ran.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import body
import record
import workflow
from workflow import ActionError


def outcome(env: Mapping[str, str]) -> body.Outcome:
    """The gate's outcome as the results folder and the environment tell it."""
    results = Path(workflow.require(env, "RESULTS_DIR"))
    link = env.get("ARTIFACT_URL") or workflow.run_url(env)
    gate = record.load(results)
    return body.Outcome(key=gate.key, exit_code=gate.exit_code, report=record.report(results), link=link)


def main(env: Mapping[str, str]) -> int:
    try:
        text = body.summary_text(outcome(env))
    except ActionError as exc:
        print(workflow.annotation("error", f"no job summary: {exc}"))
        return 1
    if not workflow.append_summary(env, text):
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
