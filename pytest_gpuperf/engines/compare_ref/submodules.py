"""Git submodules in a checkout of another revision: filled at that revision's recorded commits.

``git worktree add`` leaves a submodule's folder empty, so a base that imports a package from a
submodule would fail at import, every test "not gated". Each submodule the head has initialised is
cloned into the checkout from the head's own copy of it (``--shared``: its objects are borrowed, not
copied) and checked out at the commit the checkout's revision records; nested submodules the same way.
A commit the head's copy lacks (the pull request moved the submodule on, and the copy is shallow) is
fetched from that copy's own remote. One that cannot be had is a ``WorkerError`` naming the submodule,
its commit and what to run: the base would not be the base without it.

A submodule the head has not initialised stays empty in the checkout too: both sides then import what
the environment provides. Nothing here writes to the user's repository: the clones live in the checkout,
not in ``.git/modules``, and no ``submodule.*`` setting is added to its configuration.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.errors import WorkerError

GITLINK_MODE = "160000"  # a submodule's entry in a tree: the commit it records


@dataclass(frozen=True)
class Submodule:
    """A submodule of a checkout: its path (relative to the superproject's root) and the commit wanted there."""

    path: str
    commit: str


def recorded(repo_dir: Path, revision: str) -> list[Submodule]:
    """The submodules ``revision`` records (its tree's gitlinks), in the repository holding ``repo_dir``."""
    import git

    with git.Repo(repo_dir) as repo:
        listing = repo.git.ls_tree("-r", "-z", "--full-tree", revision)
    found = []
    for entry in listing.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[0] == GITLINK_MODE:
            found.append(Submodule(path, parts[2]))
    return found


def checked_out(repo_root: Path) -> list[Submodule]:
    """The head's submodules as its working tree has them: each initialised one at the commit it has checked out."""
    import git

    found = []
    for sub in recorded(repo_root, "HEAD"):
        source = repo_root / sub.path
        if _initialised(source):
            with git.Repo(source) as repo:
                found.append(Submodule(sub.path, repo.head.commit.hexsha))
    return found


def fill(source_root: Path, checkout: Path, wanted: list[Submodule], *, nested: bool = True) -> list[str]:
    """Clone each of ``wanted`` into ``checkout`` from the head's copy under ``source_root``; the paths filled.

    ``nested``: the submodules each one records are filled too, from the head's copies inside it.
    """
    filled = []
    for sub in wanted:
        source = source_root / sub.path
        if not _initialised(source):
            continue  # the head has none there either: both sides import what the environment provides
        target = checkout / sub.path
        _clone_at(source, target, sub)
        filled.append(sub.path)
        if nested:
            filled += [f"{sub.path}/{p}" for p in fill(source, target, recorded(target, sub.commit))]
    return filled


def _initialised(folder: Path) -> bool:
    """Whether ``folder`` holds a checked-out submodule: a ``.git`` file (into the superproject) or folder."""
    return (folder / ".git").exists()


def _clone_at(source: Path, target: Path, sub: Submodule) -> None:
    """``target``: a clone of ``source`` (its objects borrowed) at ``sub.commit``; WorkerError if it cannot be had."""
    _git(source.parent, "clone", "-q", "--shared", "--no-checkout", str(source), str(target), what=sub)
    if not _has_commit(target, sub.commit):
        _fetch_missing(source, target, sub)
    _git(target, "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", sub.commit, what=sub)


def _has_commit(repo_dir: Path, commit: str) -> bool:
    import git

    with git.Repo(repo_dir) as repo:
        try:
            repo.git.cat_file("-e", f"{commit}^{{commit}}")
        except git.GitCommandError:
            return False
    return True


def _fetch_missing(source: Path, target: Path, sub: Submodule) -> None:
    """Fetch ``sub.commit`` from the remote of the head's copy; WorkerError saying what to run if that fails."""
    import git

    with git.Repo(source) as repo:
        urls = [url for remote in repo.remotes for url in remote.urls]
        shallow = repo.git.rev_parse("--is-shallow-repository").strip() == "true"
    problem = "the head's copy of it has no remote to fetch it from"
    if urls:
        depth = ["--depth=1"] if shallow else []
        try:
            git.Git(str(target)).execute(["git", "fetch", "-q", *depth, urls[0], sub.commit])
            return
        except git.GitCommandError as exc:
            problem = f"fetching it from {urls[0]} failed ({_stderr(exc)})"
    fetch = f"git -C {shlex.quote(str(source))} fetch origin {sub.commit}"
    raise WorkerError(
        f"the base records the submodule {sub.path} at {sub.commit[:12]}, which the head's copy of it ({source}) "
        f"does not hold, and {problem}: fetch it into the head's copy ({fetch}), or run git submodule update "
        "--init --recursive in a checkout of the base"
    )


def _git(cwd: Path, *args: str, what: Submodule) -> None:
    """``git ARGS`` in ``cwd``; WorkerError naming the submodule with git's own message if it fails."""
    import git

    try:
        git.Git(str(cwd)).execute(["git", *args])
    except git.GitCommandError as exc:
        raise WorkerError(
            f"could not check out the submodule {what.path} at {what.commit[:12]}: {_stderr(exc)}"
        ) from None


def _stderr(exc: object) -> str:
    """git's own message, without GitPython's framing (``stderr: '...'``)."""
    text = str(getattr(exc, "stderr", "") or exc).strip()
    return text.removeprefix("stderr:").strip().strip("'").strip()
