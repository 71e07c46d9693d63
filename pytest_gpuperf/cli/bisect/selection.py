"""The selected perf tests as your checkout has them, for a bisect whose steps run them at older commits.

A perf suite is often newer than the commits a bisect measures. So the bisect first collects
PYTEST_ARGS in your checkout (a child ``pytest --collect-only`` with this module as a plugin, which
writes the rootdir, the configuration file and the test ids), and each step places your test files
in its commit's worktree as ``--base-tests`` asks (``engines.compare_ref.head_tests``), then runs
compare-ref with the same choice, so that GOOD runs them too.

As a plugin this module defines a hook only and imports nothing of pytest: it is loaded with ``-p``
in the child, never in the bisect's own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.cli.bisect.model import BisectError

ENV_OUTPUT = "GPUPERF_BISECT_SELECTION"  # where the child writes what it collected
_TAIL_LINES = 5


@dataclass(frozen=True)
class Selection:
    """The selected tests in your checkout: its rootdir, its pytest configuration file, the test ids."""

    rootdir: Path
    inifile: Path | None
    node_ids: tuple[str, ...]


def pytest_collection_finish(session: Any) -> None:
    """In the child: write what was collected where the bisect reads it."""
    output = os.environ.get(ENV_OUTPUT)
    if not output:
        return
    config = session.config
    document = {
        "rootdir": str(config.rootpath),
        "inifile": str(config.inipath) if config.inipath is not None else None,
        "node_ids": [item.nodeid for item in session.items],
    }
    Path(output).write_text(json.dumps(document), encoding="utf-8")


def collect(cwd: Path, pytest_args: Sequence[str], scratch: Path, env: Mapping[str, str]) -> Selection:
    """Collect ``pytest_args`` in ``cwd``; BisectError with pytest's last lines if nothing could be collected."""
    output = scratch / "selection.json"
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", __name__, "-p", "no:cacheprovider",
               *pytest_args]  # fmt: skip
    ran = subprocess.run(command, cwd=cwd, env={**env, ENV_OUTPUT: str(output)}, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    if ran.returncode not in (0, 5) or not output.is_file():  # 5: nothing collected, said below
        tail = " | ".join((ran.stdout + ran.stderr).strip().splitlines()[-_TAIL_LINES:]) or "(no output)"
        raise BisectError(f"the selected tests could not be collected in {cwd} (pytest exited {ran.returncode}): "
                          f"{tail}")  # fmt: skip
    document = json.loads(output.read_text(encoding="utf-8"))
    if not document["node_ids"]:
        raise BisectError(f"PYTEST_ARGS select no test in {cwd}: nothing to bisect")
    inifile = document["inifile"]
    return Selection(Path(document["rootdir"]), Path(inifile) if inifile else None, tuple(document["node_ids"]))
