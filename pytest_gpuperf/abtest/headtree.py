"""A checkout of the head's working tree of the same shape as the base's worktree.

The confirmation pairs compare a head worker with a base worker, and any way in
which their processes differ besides the code under test becomes a bias that
no number of pairs averages away. A worker run from the user's own checkout
differs from one run from the base's scratch worktree in its paths (another
length for every path string the interpreter, pytest and the test allocate:
another heap layout, so another state of the allocator for large tensors),
its ``.git`` (a folder rather than a file), its caches and build outputs. So the
head's confirmation workers run from a second worktree, made the same way as
the base's and beside it (``<scratch>/headtree`` next to ``<scratch>/worktree``,
names of one length): ``git worktree add --detach`` of HEAD, then the working
tree's own changes copied over it (modified, staged and untracked files that
are not ignored; deleted ones removed), so it holds the code the head's session
measures. Ignored files (in-place build outputs) are in neither checkout.

Removed with the scratch folder: ``RefWorktree.close`` and leftovers.py remove
the folder and ``git worktree prune`` drops its record.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from pytest_gpuperf.errors import WorkerError

HEADTREE_NAME = "headtree"  # as long as leftovers.WORKTREE_NAME: the two sides' paths have one length


def head_checkout(repo_root: Path, scratch: Path) -> Path:
    """``scratch/headtree``: HEAD's commit with the working tree's changes; WorkerError if git cannot."""
    import git

    path = scratch / HEADTREE_NAME
    try:
        with git.Repo(repo_root) as repo:
            repo.git.worktree("add", "--detach", str(path), "HEAD")
            changed = repo.git.diff("HEAD", "--name-only", "--no-renames", "-z").split("\0")
            untracked = repo.git.ls_files("--others", "--exclude-standard", "-z").split("\0")
    except git.GitCommandError as exc:
        with contextlib.suppress(OSError):
            shutil.rmtree(path)
        raise WorkerError(f"could not make a checkout of the head's working tree: {exc.stderr.strip()}") from None
    for name in sorted({*changed, *untracked} - {""}):
        _overlay(repo_root / name, path / name)
    return path


def _overlay(source: Path, target: Path) -> None:
    """``target`` made like ``source``: copied (links as links), or removed where ``source`` is gone."""
    if source.is_symlink() or source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        shutil.copy2(source, target, follow_symlinks=False)
    elif not source.exists():
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
