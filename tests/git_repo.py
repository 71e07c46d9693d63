"""Real git repositories for the tests: run git in a folder, start a repository with an identity."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(cwd: Path, *args: str) -> str:
    """``git ARGS`` in ``cwd``; its standard output, stripped (a failure raises)."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def init(root: Path) -> None:
    """A new repository at ``root`` on branch main, with a committer identity of its own."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
