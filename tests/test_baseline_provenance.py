"""git provenance from real repositories made with GitPython; it never raises."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.baseline.provenance import git_provenance
from pytest_gpuperf.model import Provenance

git = pytest.importorskip("git")


def make_repo(path: Path, *, commits: int = 1) -> Any:
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as config:
        config.set_value("user", "name", "Perf Tester")
        config.set_value("user", "email", "perf@example.com")
    for i in range(commits):
        (path / "code.py").write_text(f"x = {i}\n")
        repo.index.add(["code.py"])
        repo.index.commit(f"commit {i}")
    return repo


def test_clean_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    head = repo.head.commit
    prov = git_provenance(tmp_path)
    assert prov == Provenance(
        commit=head.hexsha,
        branch="main",
        dirty=False,
        commit_date=head.committed_datetime.isoformat(),
    )
    assert datetime.fromisoformat(prov.commit_date or "") == head.committed_datetime


def test_dirty_repository_and_a_path_below_it(tmp_path: Path) -> None:
    make_repo(tmp_path)
    (tmp_path / "code.py").write_text("x = 'changed'\n")
    prov = git_provenance(tmp_path / "baselines" / "not-yet-created")
    assert prov.dirty is True and prov.branch == "main" and prov.commit is not None


def test_untracked_files_do_not_make_it_dirty(tmp_path: Path) -> None:
    make_repo(tmp_path)
    (tmp_path / "new_baseline.json").write_text("{}")
    assert git_provenance(tmp_path).dirty is False


def test_other_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.create_head("perf/faster-gemm").checkout()
    assert git_provenance(tmp_path).branch == "perf/faster-gemm"


def test_detached_head_keeps_the_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, commits=2)
    first = repo.head.commit.parents[0]
    repo.git.checkout(first.hexsha)
    prov = git_provenance(tmp_path)
    assert prov.branch is None
    assert prov.commit == first.hexsha and prov.dirty is False


def test_repository_without_commits(tmp_path: Path) -> None:
    git.Repo.init(tmp_path)
    assert git_provenance(tmp_path) == Provenance()


def test_not_a_repository(tmp_path: Path) -> None:
    try:
        git.Repo(tmp_path, search_parent_directories=True)
    except git.exc.InvalidGitRepositoryError:
        pass
    else:
        pytest.skip("the temporary folder is inside a git repository on this machine")
    assert git_provenance(tmp_path) == Provenance()


def test_corrupt_repository(tmp_path: Path) -> None:
    make_repo(tmp_path)
    (tmp_path / ".git" / "HEAD").write_text("garbage\n")
    assert git_provenance(tmp_path) == Provenance()  # no exception


def test_without_gitpython(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_repo(tmp_path)
    monkeypatch.setitem(sys.modules, "git", None)  # import git -> ImportError
    assert git_provenance(tmp_path) == Provenance()


def test_path_that_does_not_exist_anywhere() -> None:
    assert isinstance(git_provenance(Path("/nonexistent/really/not/here")), Provenance)
