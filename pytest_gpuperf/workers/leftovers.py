"""Scratch folders (and worktrees) of killed runs: each records its owner, the next run removes the orphans.

``owner.json`` is written first: the pid with its start time (a pid is reused, the pair is not), and
the repository of a worktree inside. A run killed outright runs no clean-up, and ``git worktree prune``
keeps a worktree whose folder exists, so each run that makes a scratch folder first removes those
whose owner is gone (never one without an owner file).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from pytest_gpuperf.files import write_atomic

REF_PREFIX = "gpuperf-ref-"
REMEASURE_PREFIX = "gpuperf-remeasure-"
OWNER_FILE = "owner.json"
WORKTREE_NAME = "worktree"  # the base's checkout inside a gpuperf-ref- folder


@dataclass(frozen=True)
class Owner:
    """The process a scratch folder belongs to."""

    pid: int
    start_time: int | None  # clock ticks since boot (Linux); None where it cannot be read
    repo: str | None = None  # the repository of the worktree inside, if any


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (Linux ``/proc``); None if unknown or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name in (...) may hold spaces
    if fields[0] in ("Z", "X"):  # killed, not yet reaped: gone all the same
        return None
    return int(fields[19])


def make_scratch(prefix: str, repo: Path | None = None) -> Path:
    """A new folder in the temporary directory, owned by this process (its owner file written first)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        record_owner(folder, repo=repo)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def record_owner(folder: Path, *, pid: int | None = None, repo: Path | None = None) -> Owner:
    """Write ``folder``'s owner file: ``pid`` (this process by default) and its start time."""
    pid = os.getpid() if pid is None else pid
    owner = Owner(pid, process_start_time(pid), str(repo) if repo is not None else None)
    write_atomic(folder / OWNER_FILE, json.dumps(asdict(owner)) + "\n")
    return owner


def read_owner(folder: Path) -> Owner | None:
    """The owner recorded in ``folder``; None if there is no readable owner file."""
    try:
        data = json.loads((folder / OWNER_FILE).read_text(encoding="utf-8"))
        return Owner(int(data["pid"]), data.get("start_time"), data.get("repo"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def owner_alive(owner: Owner) -> bool:
    """Whether the owner process still runs; True whenever that cannot be told (never remove a live run's)."""
    if os.name != "posix":
        return True  # os.kill(pid, 0) is no probe on Windows
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    # its start time now None (a zombie) or another one (a reused pid): gone
    return owner.start_time is None or process_start_time(owner.pid) == owner.start_time


def remove_abandoned(scratch_root: Path | None = None, repo: Path | None = None) -> list[Path]:
    """Remove the scratch folders whose owner is gone, with their worktrees; returns them. Never raises.

    Those in ``scratch_root`` (the temporary directory), and those holding a worktree
    of ``repo`` wherever they are (another run's TMPDIR).
    """
    root = Path(scratch_root) if scratch_root is not None else Path(tempfile.gettempdir())
    candidates: set[Path] = set()
    with contextlib.suppress(OSError):
        candidates |= {p for p in root.iterdir() if p.name.startswith((REF_PREFIX, REMEASURE_PREFIX))}
    if repo is not None:
        candidates |= {
            wt.parent for wt in _worktrees(repo) if wt.name == WORKTREE_NAME and wt.parent.name.startswith(REF_PREFIX)
        }
    removed = []
    for folder in sorted(candidates):
        owner = read_owner(folder)
        if owner is None or owner_alive(owner):
            continue
        remove_scratch(folder, Path(owner.repo) if owner.repo else repo)
        removed.append(folder)
    return removed


def remove_scratch(folder: Path, repo: Path | None) -> None:
    """Remove a scratch folder and, given its ``repo``, the worktree in it and git's record of it; never raises."""
    if repo is not None:
        _git(repo, "worktree", "remove", "--force", str(folder / WORKTREE_NAME))
    shutil.rmtree(folder, ignore_errors=True)
    if repo is not None:
        _git(repo, "worktree", "prune")


def _worktrees(repo: Path) -> list[Path]:
    listing = _git(repo, "worktree", "list", "--porcelain") or ""
    return [Path(line.removeprefix("worktree ")) for line in listing.splitlines() if line.startswith("worktree ")]


def _git(repo: Path, *args: str) -> str | None:
    """``git -C repo args``; None if it failed (a repository since deleted, a worktree already gone)."""
    import git

    try:
        out: str = git.Git(str(repo)).execute(["git", *args])
    except (git.GitError, OSError):
        return None
    return out
