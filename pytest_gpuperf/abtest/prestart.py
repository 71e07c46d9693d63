"""The base worker, started before the head imports its tests.

A worker's start-up is mostly importing torch; started from the head's earliest hook,
it overlaps the head's own, and gets its command line once collection is done. Best
effort: on any failure the engine starts the worker itself later and reports the error.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.abtest.protocol import HeadChannel
from pytest_gpuperf.abtest.remote import RemoteSide, launch_worker
from pytest_gpuperf.abtest.worktree import BaseRef, RefWorktree

BASE_WORKER = "worker"  # its name: the log file and basetemp next to the worktree


def checkout_dir(rootdir: Path, repo_root: Path, checkout: Path) -> Path:
    """The folder in ``checkout`` that corresponds to ``rootdir`` in the repository at ``repo_root``."""
    try:
        return checkout / rootdir.resolve().relative_to(repo_root.resolve())
    except ValueError:
        return checkout


@dataclass
class EarlyBase:
    """A worktree of REF and a base worker process in it, waiting for START."""

    ref: str
    rootdir: Path
    worktree: RefWorktree
    channel: HeadChannel
    handed_over: bool = False

    def hand_over(self) -> tuple[RefWorktree, HeadChannel]:
        """Give the worktree and the process to their new owner (the engine), which closes them."""
        self.handed_over = True
        return self.worktree, self.channel

    def close(self) -> None:
        """Stop the process and remove the worktree, unless handed over; never raises."""
        if self.handed_over:
            return
        self.handed_over = True
        RemoteSide(self.channel, f"at {self.ref}").close()  # QUIT: the launcher exits without running pytest
        with contextlib.suppress(Exception):
            self.worktree.close()


def start_early(rootdir: Path, ref: str | BaseRef) -> EarlyBase | None:
    """Create the worktree of ``ref`` and start the base worker's process there; None if that failed."""
    worktree = RefWorktree(rootdir, ref)
    try:
        worktree.create()
        checkout, repo_root = worktree.path, worktree.repo_root
        assert checkout is not None and repo_root is not None
        channel = launch_worker(
            checkout_dir(rootdir, repo_root, checkout),
            (checkout, checkout / "src"),
            worktree.tmp_dir / f"{BASE_WORKER}.log",
        )
    except Exception:  # best effort (module doc): the engine's own start reports what is wrong
        worktree.close()
        return None
    return EarlyBase(worktree.ref, rootdir, worktree, channel)
