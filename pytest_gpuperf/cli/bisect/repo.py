"""The repository side: GOOD and BAD resolved (compare-ref's resolution), the candidates between them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.cli.bisect.model import BisectError
from pytest_gpuperf.errors import ConfigError


@dataclass(frozen=True)
class Repository:
    root: Path
    cwd: Path  # where the user ran the command, inside ``root``


def open_repository(cwd: Path) -> Repository:
    import git

    try:
        with git.Repo(cwd, search_parent_directories=True) as repo:
            root = repo.working_tree_dir
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BisectError(f"{cwd} is not inside a git repository") from None
    if root is None:
        raise BisectError(f"{cwd} is in a bare repository: bisect needs a work tree")
    return Repository(Path(root).resolve(), cwd.resolve())


def resolve(repo: Repository, which: str, ref: str) -> str:
    """``ref`` as a full commit hash, with compare-ref's resolution; one that could be read as an option is refused."""
    from pytest_gpuperf.engines.compare_ref.refs import resolve_ref

    if ref.startswith("-"):
        raise BisectError(f"{which} {ref!r} starts with '-': refused, git would read it as an option")
    try:
        return resolve_ref(repo.root, ref).commit
    except ConfigError:
        raise BisectError(f"{which} {ref!r} is no commit, branch or tag in {repo.root}") from None


def candidates(repo: Repository, good: str, bad: str) -> list[tuple[str, str]]:
    """(commit, subject) of BAD's first-parent line after GOOD, oldest first; BisectError if there are none."""
    import git

    with git.Repo(repo.root) as r:
        try:
            r.git.merge_base("--is-ancestor", good, bad)
        except git.GitCommandError:
            raise BisectError(f"GOOD {good[:12]} is not an ancestor of BAD {bad[:12]}") from None
        text = r.git.log("--first-parent", "--ancestry-path", "--format=%H%x00%s", f"{good}..{bad}", "--")
    found = [tuple(line.split("\0", 1)) for line in text.splitlines() if line]
    if not found:
        raise BisectError(f"no commit between GOOD and BAD: both are {good[:12]}")
    return [(c, s) for c, s in reversed(found)]
