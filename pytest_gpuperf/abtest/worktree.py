"""A temporary, detached git worktree of a ref, removed on every way out.

``git worktree add --detach`` (through GitPython) into a fresh temporary
directory; removal runs from ``close()``, from ``atexit`` as a fallback, and
on SIGTERM (turned into KeyboardInterrupt so ``finally`` blocks and pytest's
unconfigure run). KeyboardInterrupt already unwinds through pytest's
unconfigure, where the engine closes the worktree. ``git worktree prune``
afterwards drops the bookkeeping of any worktree whose folder is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from pytest_gpuperf.errors import ConfigError, WorkerError


class RefWorktree:
    """``with RefWorktree(repo_dir, ref) as wt: wt.path ...``; or ``create()`` / ``close()``."""

    def __init__(self, repo_dir: Path | str, ref: str) -> None:
        self.repo_dir = Path(repo_dir)
        self.ref = ref
        self.path: Path | None = None
        self.commit: str | None = None
        self.repo_root: Path | None = None
        self._tmp: Path | None = None
        self._previous_sigterm: Any = None
        self._closed = False

    def create(self) -> RefWorktree:
        import git

        try:
            repo = git.Repo(self.repo_dir, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise ConfigError(
                f"--gpuperf-compare-ref={self.ref}: {self.repo_dir} is not inside a git repository"
            ) from None
        with repo:  # closes GitPython's persistent git processes
            return self._create(repo)

    def _create(self, repo: Any) -> RefWorktree:
        import git

        try:
            self.commit = repo.commit(self.ref).hexsha
        except (git.BadName, ValueError, git.GitCommandError):
            raise ConfigError(
                f"--gpuperf-compare-ref={self.ref}: no such commit, branch or tag in {repo.working_tree_dir} "
                f"(fetch it first, e.g. git fetch origin {self.ref})"
            ) from None
        assert repo.working_tree_dir is not None
        self.repo_root = Path(repo.working_tree_dir)
        self._tmp = Path(tempfile.mkdtemp(prefix="gpuperf-ref-"))
        self.path = self._tmp / "worktree"
        self._install_cleanup()
        try:
            repo.git.worktree("add", "--detach", str(self.path), self.commit)
        except git.GitCommandError as exc:
            self.close()
            raise WorkerError(f"could not create a worktree of {self.ref}: {exc.stderr.strip()}") from None
        return self

    @property
    def tmp_dir(self) -> Path:
        """A scratch folder next to the worktree (logs, the worker's basetemp); removed with it."""
        assert self._tmp is not None, "create() first"
        return self._tmp

    def _install_cleanup(self) -> None:
        atexit.register(self.close)
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        previous = signal.getsignal(signal.SIGTERM)
        if previous in (signal.SIG_DFL, None):
            self._previous_sigterm = previous
            signal.signal(signal.SIGTERM, _interrupt)

    def close(self) -> None:
        """Remove the worktree and its temporary folder; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        if self._previous_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous_sigterm)
        if self.path is not None and self.repo_root is not None:
            import git

            with git.Repo(self.repo_root) as repo:
                # the folder may be gone already; prune below drops the record then
                with contextlib.suppress(git.GitCommandError):
                    repo.git.worktree("remove", "--force", str(self.path))
                if self._tmp is not None:
                    shutil.rmtree(self._tmp, ignore_errors=True)
                with contextlib.suppress(git.GitCommandError):
                    repo.git.worktree("prune")
        elif self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> RefWorktree:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # KeyboardInterrupt, not SystemExit: pytest reports a SystemExit inside a test as a
    # failure and carries on, while an interrupt ends the session through unconfigure.
    raise KeyboardInterrupt(f"signal {signum}")
