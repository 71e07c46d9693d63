"""The base revision of ``--gpuperf-compare-ref`` and a temporary, detached git worktree of it.

The head's generated files (a setuptools-scm ``_version.py``) are copied in, so that the base imports as the
head does (generated.py). The worktree lies in a scratch folder that records its owner (leftovers.py). It is
removed by ``close()``, by ``atexit`` as a fallback, and on SIGTERM (turned into
KeyboardInterrupt so that ``finally`` blocks and pytest's unconfigure run).
"""

from __future__ import annotations

import atexit
import contextlib
import shlex
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from pytest_gpuperf.engines.compare_ref.generated import carry_generated
from pytest_gpuperf.errors import ConfigError, WorkerError
from pytest_gpuperf.workers.leftovers import REF_PREFIX, WORKTREE_NAME, make_scratch, remove_abandoned, remove_scratch

OPTION = "--gpuperf-compare-ref"


@dataclass(frozen=True)
class BaseRef:
    """The compare-ref revision, resolved: as the user wrote it, its commit, and the repository's root."""

    ref: str
    commit: str
    repo_root: Path


def resolve_ref(repo_dir: Path | str, ref: str) -> BaseRef:
    """Resolve ``ref`` in the repository holding ``repo_dir`` as git does; ConfigError naming it if it cannot."""
    import git

    if not ref.strip():
        raise ConfigError(f"{OPTION} needs a git revision (a branch, tag or commit, HEAD~1, origin/main), got ''")
    try:
        repo = git.Repo(repo_dir, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise ConfigError(f"{OPTION}={ref}: {repo_dir} is not inside a git repository") from None
    with repo:  # closes GitPython's persistent git processes
        assert repo.working_tree_dir is not None
        root = Path(repo.working_tree_dir)
        try:
            # git itself, not GitPython's rev_parse, which lacks @{-1}, @{upstream} and more
            commit = repo.git.rev_parse("--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}").strip()
        except git.GitCommandError:
            hint = _fetch_hint(repo, ref)
            raise ConfigError(f"{OPTION}={ref}: no such commit, branch or tag in {root} ({hint})") from None
    return BaseRef(ref, commit, root)


def _fetch_hint(repo: Any, ref: str) -> str:
    """What to fetch: in a shallow clone (CI's default) the base is usually history it does not hold.

    The command is one to copy: the ref is quoted for the shell and follows ``--``, so that a ref such
    as ``--upload-pack=...`` is a ref to git, never an option.
    """
    import git

    fetch = f"git fetch origin -- {shlex.quote(ref)}"
    with contextlib.suppress(git.GitCommandError):
        if repo.git.rev_parse("--is-shallow-repository").strip() == "true":
            return (
                "this is a shallow clone, which may not hold it: fetch more history (git fetch --deepen=50 origin, "
                f"or git fetch --unshallow; actions/checkout: fetch-depth: 0), or the ref itself ({fetch})"
            )
    return f"fetch it first, e.g. {fetch}"


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
            self.carried = tuple(carry_generated(base.repo_root, self.path))
        except git.GitCommandError as exc:
            self.close()
            raise WorkerError(f"could not create a worktree of {self.ref}: {exc.stderr.strip()}") from None
        except OSError as exc:
            self.close()
            raise WorkerError(
                f"could not copy the head's generated files into the worktree of {self.ref}: {exc}"
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
