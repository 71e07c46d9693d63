"""A temporary, detached git worktree of the base revision of ``--gpuperf-compare-ref`` (resolved by refs.py).

Its submodules are filled at the base's recorded commits (submodules.py) and the head's generated files
(a setuptools-scm ``_version.py``) are copied in, so that the base imports as the head does (generated.py).
The worktree lies in a scratch folder that records its owner (leftovers.py). It is removed by ``close()``,
by ``atexit`` as a fallback, and on SIGTERM (turned into KeyboardInterrupt so that ``finally`` blocks and
pytest's unconfigure run).
"""

from __future__ import annotations

import atexit
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from pytest_gpuperf.engines.compare_ref.generated import carry_generated
from pytest_gpuperf.engines.compare_ref.refs import BaseRef, resolve_ref
from pytest_gpuperf.engines.compare_ref.submodules import fill, recorded
from pytest_gpuperf.errors import WorkerError
from pytest_gpuperf.report.text import plain
from pytest_gpuperf.workers.leftovers import REF_PREFIX, WORKTREE_NAME, make_scratch, remove_abandoned, remove_scratch


class RefWorktree:
    """``with RefWorktree(repo_dir, ref) as wt: wt.path ...``; or ``create()`` / ``close()``.

    ``ref`` is a :class:`BaseRef` resolved earlier, or a revision resolved by ``create()``.
    """

    def __init__(self, repo_dir: Path | str, ref: str | BaseRef) -> None:
        self.repo_dir = Path(repo_dir)
        self.base = ref if isinstance(ref, BaseRef) else None
        self.ref = ref.ref if isinstance(ref, BaseRef) else ref
        self.path: Path | None = None
        self.commit: str | None = None
        self.repo_root: Path | None = None
        self.carried: tuple[str, ...] = ()  # the head's generated files copied in (generated.py)
        self.submodules: tuple[str, ...] = ()  # the submodules filled at the base's recorded commits (submodules.py)
        self._tmp: Path | None = None
        self._previous_sigterm: Any = None
        self._closed = False

    def create(self) -> RefWorktree:
        import git

        base = self.base or resolve_ref(self.repo_dir, self.ref)
        self.commit, self.repo_root = base.commit, base.repo_root
        remove_abandoned(repo=base.repo_root)  # worktrees of runs killed before they could remove them
        self._tmp = make_scratch(REF_PREFIX, repo=base.repo_root)
        self.path = self._tmp / WORKTREE_NAME
        self._install_cleanup()
        try:
            with git.Repo(base.repo_root) as repo:
                repo.git.worktree("add", "--detach", str(self.path), self.commit)
            self.submodules = tuple(fill(base.repo_root, self.path, recorded(base.repo_root, self.commit)))
            self.carried = tuple(carry_generated(base.repo_root, self.path))
        except WorkerError:
            self.close()
            raise
        except git.GitCommandError as exc:
            self.close()
            raise WorkerError(f"could not create a worktree of {plain(self.ref)}: {exc.stderr.strip()}") from None
        except OSError as exc:
            self.close()
            raise WorkerError(
                f"could not copy the head's generated files into the worktree of {plain(self.ref)}: {exc}"
            ) from None
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
        if self._tmp is not None:
            remove_scratch(self._tmp, self.repo_root)

    def __enter__(self) -> RefWorktree:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # KeyboardInterrupt, not SystemExit: pytest reports a SystemExit inside a test as a
    # failure and carries on, while an interrupt ends the session through unconfigure.
    raise KeyboardInterrupt(f"signal {signum}")
