"""A checkout of the head's working tree of the same shape as the base's worktree.

Any difference between a confirmation pair's processes besides the code under test is a bias no
number of pairs averages away: paths of another length (another heap layout), a ``.git`` folder,
caches, build outputs. So the head's workers run from ``<scratch>/headtree``, made like
``<scratch>/worktree``: HEAD with the working tree's non-ignored changes copied over it, and its
submodules at the commits the head has checked out, with their changes (submodules.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pytest_gpuperf.engines.compare_ref.generated import carry_generated
from pytest_gpuperf.engines.compare_ref.submodules import checked_out, fill
from pytest_gpuperf.errors import WorkerError

HEADTREE_NAME = "headtree"  # as long as leftovers.WORKTREE_NAME: the two sides' paths have one length


def head_checkout(repo_root: Path, scratch: Path) -> Path:
    """``scratch/headtree``: HEAD's commit with the working tree's changes; WorkerError if git cannot."""
    import git

    path = scratch / HEADTREE_NAME
    try:
        with git.Repo(repo_root) as repo:
            repo.git.worktree("add", "--detach", str(path), "HEAD")
        _overlay_changes(repo_root, path)
        submodules = fill(repo_root, path, checked_out(repo_root))  # at the commits the head has checked out
        for name in submodules:
            _overlay_changes(repo_root / name, path / name)
    except git.GitCommandError as exc:
        shutil.rmtree(path, ignore_errors=True)
        raise WorkerError(f"could not make a checkout of the head's working tree: {exc.stderr.strip()}") from None
    try:
        carry_generated(repo_root, path)  # the git-ignored files a build wrote into the packages, as in the base's
    except OSError as exc:
        raise WorkerError(f"could not copy the head's generated files into its checkout {path}: {exc}") from None
    return path


def _overlay_changes(source: Path, target: Path) -> None:
    """The working tree's changes and untracked files of the repository at ``source`` copied onto ``target``."""
    import git

    with git.Repo(source) as repo:
        changed = repo.git.diff("HEAD", "--name-only", "--no-renames", "-z").split("\0")
        untracked = repo.git.ls_files("--others", "--exclude-standard", "-z").split("\0")
    for name in sorted({*changed, *untracked} - {""}):
        _overlay(source / name, target / name)


def _overlay(source: Path, target: Path) -> None:
    """``target`` made like ``source``: copied (links as links), or removed where ``source`` is gone."""
    if source.is_symlink() or source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    elif not source.exists():
        target.unlink(missing_ok=True)
