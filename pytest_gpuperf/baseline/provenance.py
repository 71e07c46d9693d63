"""The git state a baseline was recorded at, read with GitPython, best effort."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pytest_gpuperf.model import Provenance

T = TypeVar("T")


def _existing_dir(path: Path) -> Path | None:
    """``path`` or its nearest existing ancestor directory (the baselines folder may not exist yet)."""
    return next((candidate for candidate in (path, *path.parents) if candidate.is_dir()), None)


def git_provenance(path: Path) -> Provenance:
    """Commit, branch, dirtiness and commit date of the repository holding ``path``; never raises.

    Without GitPython or git, outside a repository or without commits every field is None; on a detached
    HEAD only ``branch`` is."""
    try:
        import git
    except ImportError:  # GitPython missing, or it found no git executable
        return Provenance()
    start = _existing_dir(Path(path).absolute())
    if start is None:
        return Provenance()
    try:
        repo = git.Repo(start, search_parent_directories=True)
    except (git.exc.GitError, OSError, ValueError):
        return Provenance()
    # No commits: ValueError; detached HEAD: TypeError; a broken repository or
    # git binary: GitError/OSError. Each field fails alone.
    failures = (git.exc.GitError, OSError, ValueError, TypeError)
    with repo:
        commit = _attempt(lambda: repo.head.commit.hexsha, failures)
        if commit is None:  # no commits yet: nothing to tie a baseline to
            return Provenance()
        return Provenance(
            commit=commit,
            branch=_attempt(lambda: repo.active_branch.name, failures),
            dirty=_attempt(lambda: repo.is_dirty(untracked_files=False), failures),
            commit_date=_attempt(lambda: repo.head.commit.committed_datetime.isoformat(), failures),
        )


def _attempt(read: Callable[[], T], failures: tuple[type[BaseException], ...]) -> T | None:
    try:
        return read()
    except failures:
        return None
