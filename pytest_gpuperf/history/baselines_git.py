"""The baselines' git history as a source of the performance history.

Every version of every baseline file is read from git (GitPython) with the baseline store's
own ``codec.load_document``, oldest commit first, so files written by an older schema are
migrated on the way. A file version that cannot be read is named in ``skipped``, never fatal:
one bad commit must not end all history.

Two readers use it: ``ingest.runs_from_baselines`` (one update run per commit and device
class) and ``baselines_view`` (``gpuperf history baselines`` and the HTML report's trends).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_gpuperf.baseline.codec import load_document
from pytest_gpuperf.errors import BaselineError, HistoryError
from pytest_gpuperf.model import BaselineEntry


@dataclass(frozen=True)
class BaselineVersion:
    """One version of one baseline entry: the commit that wrote it."""

    commit: str
    date: str  # ISO 8601 commit date
    summary: str
    device_class: str
    entry: BaselineEntry


@dataclass(frozen=True)
class BaselineLog:
    """Every entry's versions, oldest first; a version is listed only where the entry changed."""

    versions: tuple[BaselineVersion, ...]
    commits: int  # commits that touched the folder
    skipped: tuple[str, ...]  # file versions that could not be read, with the reason

    def by_entry(self) -> dict[tuple[str, str], list[BaselineVersion]]:
        """The versions of each (device class, entry key), oldest first, sorted by that pair."""
        grouped: dict[tuple[str, str], list[BaselineVersion]] = {}
        for version in self.versions:
            grouped.setdefault((version.device_class, version.entry.key), []).append(version)
        return dict(sorted(grouped.items()))


def read_baselines(baselines: Path | str, *, rev: str = "HEAD", match: str | None = None) -> BaselineLog:
    """The versions of every entry (whose key contains ``match``) over the commits that touched ``baselines``.

    HistoryError when the folder is not in a git repository, ``rev`` is unknown, or no commit touches it.
    """
    folder = Path(baselines)
    repo, relative = _repo(folder)
    path_filter = [str(relative)] if str(relative) != "." else []
    try:
        commits = list(repo.iter_commits(rev, paths=path_filter, reverse=True))
    except Exception as exc:  # GitCommandError on an unknown rev or an empty repository
        raise HistoryError(f"cannot list the commits of {folder} at {rev}: {exc}", path=folder, rev=rev) from None
    if not commits:
        raise HistoryError(f"no commit touches {folder}", path=folder, rev=rev)
    parsed: dict[str, dict[str, BaselineEntry]] = {}  # by blob sha: unchanged files are read once
    skipped: list[str] = []
    latest: dict[tuple[str, str], BaselineEntry] = {}
    versions: list[BaselineVersion] = []
    for commit in commits:
        for device_class, blob in _file_versions(commit, relative):
            if blob.hexsha not in parsed:
                try:
                    parsed[blob.hexsha] = load_document(blob.data_stream.read(), f"{commit.hexsha[:12]}:{blob.path}")
                except BaselineError as exc:
                    parsed[blob.hexsha] = {}
                    skipped.append(str(exc))
            for key, entry in parsed[blob.hexsha].items():
                if (match is not None and match not in key) or latest.get((device_class, key)) == entry:
                    continue  # not asked for, or this commit changed another entry or file
                latest[(device_class, key)] = entry
                date = commit.committed_datetime.isoformat()
                versions.append(BaselineVersion(commit.hexsha, date, str(commit.summary), device_class, entry))
    return BaselineLog(tuple(versions), len(commits), tuple(skipped))


def _repo(baselines: Path) -> tuple[Any, PurePosixPath]:
    import git

    # The folder may be gone from the work tree and still have a history: search from its nearest parent.
    start = next((p for p in (baselines, *baselines.resolve().parents) if p.exists()), baselines)
    try:
        repo = git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise HistoryError(f"{baselines} is not inside a git repository", path=baselines) from None
    top = Path(repo.working_tree_dir or ".").resolve()
    try:
        relative = baselines.resolve().relative_to(top)
    except ValueError:
        raise HistoryError(f"{baselines} is outside the repository at {top}", path=baselines) from None
    return repo, PurePosixPath(relative.as_posix())


def _file_versions(commit: Any, folder: PurePosixPath) -> Iterator[tuple[str, Any]]:
    """(device class, blob) of every baseline file in ``commit`` under ``folder``."""
    try:
        tree = commit.tree / str(folder) if str(folder) != "." else commit.tree
    except KeyError:
        return  # the folder was deleted in this commit
    for item in tree.traverse():
        parts = (
            PurePosixPath(item.path).relative_to(folder).parts if str(folder) != "." else PurePosixPath(item.path).parts
        )
        if item.type == "blob" and len(parts) == 2 and parts[1].endswith(".json") and not parts[1].startswith("."):
            yield parts[0], item
