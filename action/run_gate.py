"""The gate: pytest-gpuperf in compare-ref mode on the suite, every report into one folder.

Runs ``pytest <suite> --gpuperf --gpuperf-compare-ref=<base> --gpuperf-json
--gpuperf-markdown --gpuperf-html [--gpuperf-profile] <pytest-args>`` with the
action's virtual environment (in the history flow, ``FLOW=history``, baseline mode
instead of compare-ref: the session is recorded in the store ``GPUPERF_HISTORY`` names,
which reaches pytest through the environment, never its command line), records the
exit code in ``gate.json`` and in the step output ``exit-code``, and itself ends with 0:
the summary, the upload and the comment come first, and the action's last step ends the
job with pytest's code.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import record
import workflow
from workflow import ActionError

TRACES = "traces"


def pytest_command(
    python: str, suite: str, compare_ref: str, results: Path, profile: bool, extra: str, *, history: bool = False
) -> list[str]:
    """The command line; ``suite`` and ``extra`` are split like a shell would, never run by one."""
    try:
        paths = shlex.split(suite)
        more = shlex.split(extra)
    except ValueError as exc:
        raise ActionError(f"cannot split the suite or pytest-args input: {exc}") from None
    if not paths:
        raise ActionError("the suite input is empty: give the perf tests' path(s)")
    command = [
        python, "-m", "pytest", *paths,
        "--gpuperf",
        *([] if history else [f"--gpuperf-compare-ref={compare_ref}"]),
        f"--gpuperf-json={results / 'results.json'}",
        f"--gpuperf-markdown={results / record.REPORT}",
        f"--gpuperf-html={results / 'report.html'}",
    ]  # fmt: skip
    if profile:
        command.append(f"--gpuperf-profile={results / TRACES}")
    return command + more


def _child_env(env: Mapping[str, str], venv_bin: Path) -> dict[str, str]:
    child = dict(env)
    child["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"  # tools a test starts come from the venv
    child["VIRTUAL_ENV"] = str(venv_bin.parent)
    return child


def main(env: Mapping[str, str], cwd: Path | None = None) -> int:
    results = Path(workflow.require(env, "RESULTS_DIR"))
    try:
        gate = record.load(results)
        python = workflow.require(env, "PYTHON")
        command = pytest_command(
            python,
            env.get("SUITE", ""),
            gate.compare_ref,
            results,
            env.get("PROFILE", "false").strip().lower() == "true",
            env.get("PYTEST_ARGS", ""),
            history=env.get("FLOW") == "history",
        )
    except ActionError as exc:
        print(workflow.annotation("error", str(exc)))
        return 1
    print("pytest-gpuperf:", shlex.join(command), flush=True)
    code = subprocess.run(command, cwd=cwd, env=_child_env(env, Path(python).parent), check=False).returncode
    if code < 0:
        code = 128 - code  # killed by a signal: the shell's convention, so the job fails with it
    record.write(results, replace(gate, exit_code=code))
    workflow.set_outputs(env, {"exit-code": str(code)})
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
