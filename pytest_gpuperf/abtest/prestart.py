"""The base worker, started before the head imports its tests.

A worker's start-up is mostly importing torch (seconds of CPU). Started from the
head's earliest hook (``pytest_load_initial_conftests``, before conftests and test
modules import torch), its start-up overlaps the head's instead of delaying the
first measurement. The session's tests are not known yet, so the process imports
torch and waits for its command line (remote.py's launcher);
``CompareRefEngine.start`` sends it once collection is done, and only the files
holding perf tests are collected.

Best effort: any failure here leaves nothing behind and the engine starts the
worktree and worker itself later, reporting the error then, as before.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.abtest.protocol import HeadChannel
from pytest_gpuperf.abtest.remote import RemoteSide, launch_worker
from pytest_gpuperf.abtest.worktree import BaseRef, RefWorktree

BASE_WORKER = "worker"  # its name: the log file and basetemp next to the worktree


def ref_checkout_dir(rootdir: Path, worktree: RefWorktree) -> Path:
    """The folder in the worktree that corresponds to the head's ``rootdir``."""
    assert worktree.path is not None and worktree.repo_root is not None
    try:
        rel = rootdir.resolve().relative_to(worktree.repo_root.resolve())
    except ValueError:
        rel = Path()
    return worktree.path / rel


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
        checkout = worktree.path
        assert checkout is not None
        channel = launch_worker(
            ref_checkout_dir(rootdir, worktree), (checkout, checkout / "src"), worktree.tmp_dir / f"{BASE_WORKER}.log"
        )
    except Exception:  # best effort (module doc): the engine's own start reports what is wrong
        worktree.close()
        return None
    return EarlyBase(worktree.ref, rootdir, worktree, channel)
