"""The package builds without a warning from its build backend."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_wheel_builds_without_warnings_and_declares_its_license(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: the build's own folders stay out of the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "pytest_gpuperf", source / "pytest_gpuperf", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), "."],
        cwd=source,
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PYTHONWARNINGS": "default"},
        timeout=300,
        check=False,
    )
    output = built.stdout + built.stderr
    assert built.returncode == 0, output
    assert "warning" not in output.lower() and "deprecat" not in output.lower(), output
    (wheel,) = (tmp_path / "dist").glob("pytest_gpuperf-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        assert "License-Expression: MIT" in archive.read(metadata).decode().splitlines()
        names = set(archive.namelist())
    # the history store's migrations run from the installed package (history/store.py)
    assert {"pytest_gpuperf/history/migrations/env.py",
            "pytest_gpuperf/history/migrations/versions/0001_runs_and_values.py",
            "pytest_gpuperf/history/migrations/versions/0002_busy_values.py",
            "pytest_gpuperf/history/migrations/versions/0003_detectable_values.py"} <= names  # fmt: skip
    # the dashboard copies its script and style sheet from the installed package into every site
    assert {"pytest_gpuperf/history/dashboard/assets/dashboard.js",
            "pytest_gpuperf/history/dashboard/assets/dashboard.css"} <= names  # fmt: skip


def test_the_readmes_install_commands_hold_no_placeholder_a_user_would_copy() -> None:
    """Each ``pip install`` of the README's install block runs as written: a path, a package, no ``OWNER``."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Install", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    installs = [line.split("#", 1)[0].split() for line in block.splitlines() if line.startswith("pip install")]
    assert [words[2:] for words in installs] == [["torch"], ["."]]
    assert "OWNER" not in block
    assert "`OWNER/pytest-gpuperf` is the GitHub repository that hosts your copy" in readme  # the Action's line
