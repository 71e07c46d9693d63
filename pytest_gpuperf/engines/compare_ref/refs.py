"""The base revision of ``--gpuperf-compare-ref``: resolved once, and what to fetch when this clone lacks it.

A clone made by CI is usually shallow and holds one branch (``git clone --depth 1`` implies
``--single-branch``): its fetch refspec names that branch alone, so ``git fetch --deepen=50 origin`` or
``--unshallow`` never brings another branch, and a remote-tracking name (``origin/main``) or a relative
revision (``HEAD~1``) is no ref the remote has. ``fetch_hint`` gives the command that brings the commit in
such a clone: an explicit refspec for a branch, ``tag NAME`` for a tag, the full hash for a commit, a
``--deepen`` of the commit a relative revision counts from.

Every ref shown to the user goes through ``report.text.plain``, as test ids do: a ref is typed by a user or
a workflow, and a terminal must not act on its control characters.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.report.text import plain

OPTION = "--gpuperf-compare-ref"
CHANGES_SHOWN = 3  # of the working tree's changes, named when the base is the head's own commit
_FULL_HASH = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SHORT_HASH = re.compile(r"[0-9a-f]{7,63}")
# A revision counted from another one: ``X~2``, ``X^``, ``X^2~3``.
_RELATIVE = re.compile(r"^(?P<start>.+?)(?P<steps>(?:[~^][0-9]*)+)$")


@dataclass(frozen=True)
class BaseRef:
    """The compare-ref revision, resolved: as the user wrote it, its commit, and the repository's root."""

    ref: str
    commit: str
    repo_root: Path

    @property
    def shown(self) -> str:
        """The ref as the user wrote it, made inert for a terminal (``report.text.plain``)."""
        return plain(self.ref)


@dataclass(frozen=True)
class HeadCommit:
    """The base is the head's own commit: only the working tree's uncommitted changes can differ."""

    commit: str
    changes: tuple[str, ...]  # ``git status --porcelain`` paths, tracked and untracked (not ignored)

    def describe(self) -> str:
        """``the head's own commit: only the working tree's 2 uncommitted changes (model.py, x.py) are compared``."""
        names = ", ".join(plain(c) for c in self.changes[:CHANGES_SHOWN])
        more = f", +{len(self.changes) - CHANGES_SHOWN} more" if len(self.changes) > CHANGES_SHOWN else ""
        count = f"{len(self.changes)} uncommitted change{'s' if len(self.changes) != 1 else ''}"
        return f"the head's own commit: only the working tree's {count} ({names}{more}) are compared"


def resolve_ref(repo_dir: Path | str, ref: str) -> BaseRef:
    """Resolve ``ref`` in the repository holding ``repo_dir`` as git does; ConfigError naming it if it cannot."""
    import git

    shown = plain(ref)
    if not ref.strip():
        raise ConfigError(f"{OPTION} needs a git revision (a branch, tag or commit, HEAD~1, origin/main), got ''")
    try:
        repo = git.Repo(repo_dir, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise ConfigError(f"{OPTION}={shown}: {repo_dir} is not inside a git repository") from None
    with repo:  # closes GitPython's persistent git processes
        assert repo.working_tree_dir is not None
        root = Path(repo.working_tree_dir)
        commit = _commit(repo, ref)
        if commit is None:
            raise ConfigError(f"{OPTION}={shown}: no such commit, branch or tag in {root} ({fetch_hint(repo, ref)})")
    return BaseRef(ref, commit, root)


def _commit(repo: Any, rev: str) -> str | None:
    """The commit ``rev`` names here, or None; git itself, not GitPython's rev_parse, which lacks @{-1}, @{u}."""
    import git

    try:
        return str(repo.git.rev_parse("--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")).strip()
    except git.GitCommandError:
        return None


def head_commit(base: BaseRef) -> HeadCommit | None:
    """``base`` as the head's own commit, with the working tree's changes; None when the base is another commit."""
    import git

    with git.Repo(base.repo_root) as repo:
        if _commit(repo, "HEAD") != base.commit:
            return None
        status = repo.git.status("--porcelain=v1", "-z", "--untracked-files=normal")
    return HeadCommit(base.commit, tuple(_porcelain_paths(status)))


def _porcelain_paths(status: str) -> list[str]:
    """The paths of ``git status --porcelain=v1 -z``: ``XY path``, a rename's or copy's source as the next entry."""
    entries, paths = iter(status.split("\0")), []
    for entry in entries:
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":
                next(entries, None)  # the source path of the rename or copy
    return paths


def nothing_to_compare(base: BaseRef, head: HeadCommit) -> str:
    """Why a run whose base is the head's own commit, with no change in the working tree, would gate nothing."""
    return (
        f"{OPTION}={base.shown} resolves to {base.commit[:12]}, the head's own commit, and the working tree has "
        "no uncommitted change: the run would compare the code with itself and gate nothing. Compare with the "
        "commit the change is based on (HEAD~1, or the pull request's base: origin/main in a checkout of the "
        "pull request); in a shallow clone of the branch itself, fetch the commit before it first "
        f"({fetch_hint_for_missing_parent(base)})"
    )


def fetch_hint_for_missing_parent(base: BaseRef) -> str:
    """How to bring the commit before ``base`` into this clone (HEAD~1 is what a push to a branch compares with)."""
    import git

    with git.Repo(base.repo_root) as repo:
        if _commit(repo, f"{base.commit}~1") is not None:
            return "HEAD~1 is here already"
        return fetch_hint(repo, "HEAD~1")


def fetch_hint(repo: Any, ref: str) -> str:
    """What would bring ``ref``'s commit into this clone: a command that works here, or why none can.

    The command is one to copy: every part from the ref is quoted for the shell and can never be an option.
    """
    if plain(ref) != ref:  # a command with them could not be shown as it is
        return f"{plain(ref)} holds control characters, so no command to fetch it is given"
    shallow = _is_shallow(repo)
    relative = _RELATIVE.match(ref)
    if relative is not None and not shallow and _commit(repo, relative["start"]) is not None:
        steps = _count_steps(relative["steps"])
        return f"{plain(relative['start'])} has fewer than {steps} commit(s) before it here: no fetch can add them"
    remote = _remote(repo)
    if remote is None:
        where = "this shallow clone" if shallow else "the repository"
        return f"{where} has no remote to fetch it from (git remote -v lists none)"
    if relative is not None:
        return _relative_hint(repo, remote, relative["start"], _count_steps(relative["steps"]), shallow)
    return _name_hint(repo, remote, ref, depth=1 if shallow else None)


def _relative_hint(repo: Any, remote: str, start: str, steps: int, shallow: bool) -> str:
    """``START~N`` in a shallow clone, or START not here: deepen START's history by N, or fetch START with N more."""
    start_commit = _commit(repo, start)
    if start_commit is None:
        return _name_hint(repo, remote, start, depth=steps + 1 if shallow else None)
    # by its hash: a detached HEAD (a pull request's merge commit) is on no branch the refspec names
    command = f"git fetch --deepen={steps} {shlex.quote(remote)} {start_commit}"
    return f"this shallow clone does not hold {plain(start)}'s history that far back: {command}{_checkout_note()}"


def _name_hint(repo: Any, remote: str, ref: str, *, depth: int | None) -> str:
    """A branch, tag, remote-tracking branch or commit hash, fetched by what it must be on the remote."""
    deepen = f" --depth={depth}" if depth else ""
    q_remote = shlex.quote(remote)
    note = _checkout_note() if depth else ""
    if _FULL_HASH.fullmatch(ref):
        return f"fetch the commit: git fetch{deepen} {q_remote} {ref}{note}"
    if _SHORT_HASH.fullmatch(ref):
        return (f"an abbreviated hash cannot be fetched: fetch the full one (git fetch{deepen} {q_remote} <full "
                f"hash>) or the branch or tag that holds it{note}")  # fmt: skip
    remote_branch = _remote_branch(repo, ref)
    if remote_branch is not None:
        name, branch = remote_branch
        spec = shlex.quote(f"+refs/heads/{branch}:refs/remotes/{name}/{branch}")
        return f"this clone does not track that branch: git fetch{deepen} {shlex.quote(name)} {spec}{note}"
    for kind, prefix in (("tag", "refs/tags/"), ("branch", "refs/heads/")):
        if ref.startswith(prefix) and _valid_ref(repo, ref):
            what = f"tag {shlex.quote(ref.removeprefix(prefix))}" if kind == "tag" else shlex.quote(f"+{ref}:{ref}")
            return f"fetch the {kind}: git fetch{deepen} {q_remote} {what}{note}"
    if not _valid_branch(repo, ref):
        shown = shlex.quote(plain(ref))
        return f"{shown} is no branch, tag or commit hash a remote could have, so no fetch can bring it"
    branch_spec = shlex.quote(f"+refs/heads/{ref}:refs/remotes/{remote}/{ref}")
    return (
        f"a branch of {plain(remote)}: git fetch{deepen} {q_remote} {branch_spec}, then compare with "
        f"{OPTION}={shlex.quote(f'{remote}/{ref}')}; a tag: git fetch{deepen} {q_remote} tag {shlex.quote(ref)}{note}"
    )


def _checkout_note() -> str:
    return "; in actions/checkout, fetch-depth: 0 fetches every branch and tag with their history"


def _count_steps(steps: str) -> int:
    """Commits back: ``~3`` counts 3, ``^`` and ``^2`` (a parent) 1 each."""
    total = 0
    for part in re.findall(r"[~^][0-9]*", steps):
        total += int(part[1:] or 1) if part[0] == "~" else 1
    return total


def _is_shallow(repo: Any) -> bool:
    import git

    with contextlib.suppress(git.GitCommandError):
        return bool(repo.git.rev_parse("--is-shallow-repository").strip() == "true")
    return False


def _remote(repo: Any) -> str | None:
    """``origin``, else the first remote; None without any."""
    names = [r.name for r in repo.remotes]
    return "origin" if "origin" in names else (names[0] if names else None)


def _remote_branch(repo: Any, ref: str) -> tuple[str, str] | None:
    """``origin/feature`` or ``refs/remotes/origin/feature`` as (remote, branch), the remote one of this clone's."""
    name = ref.removeprefix("refs/remotes/")
    for remote in sorted((r.name for r in repo.remotes), key=len, reverse=True):
        branch = name.removeprefix(f"{remote}/")
        if branch != name and branch and _valid_branch(repo, branch):
            return remote, branch
    return None


def _valid_branch(repo: Any, name: str) -> bool:
    """Whether ``name`` could be a branch (``git check-ref-format --branch``): a hostile ref never reaches a command."""
    return _valid_ref(repo, f"refs/heads/{name}") and not name.startswith("-")


def _valid_ref(repo: Any, full: str) -> bool:
    import git

    try:
        repo.git.check_ref_format(full)
    except git.GitCommandError:
        return False
    return True
