"""The worktree of REF and the session's zygote, started before the head imports its tests.

A worker's start-up is mostly importing torch, which the zygote does for every worker
(twins.py); started from the head's earliest hook, its import overlaps the head's own, and
the base worker is forked from it once collection is done. Best effort: on any failure the
engine starts both itself later and reports the error.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.engines.compare_ref.refs import BaseRef
from pytest_gpuperf.engines.compare_ref.worktree import RefWorktree
from pytest_gpuperf.workers.twins import Zygote

BASE_WORKER = "worker"  # its name: the log file and basetemp next to the worktree


def checkout_dir(rootdir: Path, repo_root: Path, checkout: Path) -> Path:
    """The folder in ``checkout`` that corresponds to ``rootdir`` in the repository at ``repo_root``."""
    try:
        return checkout / rootdir.resolve().relative_to(repo_root.resolve())
    except ValueError:
        return checkout


@dataclass
class EarlyBase:
    """A worktree of REF and the session's zygote, importing torch in its scratch folder."""

    ref: str
    rootdir: Path
    worktree: RefWorktree
    zygote: Zygote
    handed_over: bool = False

    def hand_over(self) -> tuple[RefWorktree, Zygote]:
        """Give the worktree and the zygote to their new owner (the engine), which closes them."""
        self.handed_over = True
        return self.worktree, self.zygote

    def close(self) -> None:
        """End the zygote and remove the worktree, unless handed over; never raises."""
        if self.handed_over:
            return
        self.handed_over = True
        self.zygote.close()
        with contextlib.suppress(Exception):
            self.worktree.close()


def start_early(rootdir: Path, ref: str | BaseRef) -> EarlyBase | None:
    """Create the worktree of ``ref`` and start the session's zygote next to it; None if that failed."""
    worktree = RefWorktree(rootdir, ref)
    try:
        worktree.create()
        zygote = Zygote(worktree.tmp_dir)
        zygote.start()
    except Exception:  # best effort (module doc): the engine's own start reports what is wrong
        worktree.close()
        return None
    return EarlyBase(worktree.ref, rootdir, worktree, zygote)
