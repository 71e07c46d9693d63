from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from pytest_gpuperf.engines.compare_ref.worktree import RefWorktree
from pytest_gpuperf.errors import ConfigError


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[git.Repo]:
    r = git.Repo.init(tmp_path / "repo")
    with r.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@example.com")
    work = Path(r.working_tree_dir or "")
    (work / "f.txt").write_text("base\n")
    r.index.add(["f.txt"])
    r.index.commit("base")
    (work / "f.txt").write_text("head\n")
    r.index.add(["f.txt"])
    r.index.commit("head")
    with r:
        yield r


def _worktrees(r: git.Repo) -> int:
    return sum(line.startswith("worktree ") for line in r.git.worktree("list", "--porcelain").splitlines())


def test_worktree_checks_out_the_ref_and_is_removed(repo: git.Repo) -> None:
    with RefWorktree(repo.working_tree_dir or "", "HEAD~1") as wt:
        assert wt.path is not None and (wt.path / "f.txt").read_text() == "base\n"
        assert wt.commit == repo.commit("HEAD~1").hexsha
        assert _worktrees(repo) == 2
        tmp = wt.tmp_dir
    assert not tmp.exists()
    assert _worktrees(repo) == 1


def test_worktree_is_removed_after_an_exception(repo: git.Repo) -> None:
    with pytest.raises(RuntimeError), RefWorktree(Path(repo.working_tree_dir or "") / ".", "HEAD~1") as wt:
        path = wt.path
        raise RuntimeError("boom")
    assert path is not None and not path.exists()
    assert _worktrees(repo) == 1


def test_close_is_idempotent_and_prunes_a_deleted_folder(repo: git.Repo) -> None:
    wt = RefWorktree(repo.working_tree_dir or "", "HEAD").create()
    import shutil

    shutil.rmtree(wt.tmp_dir)  # someone removed the folder behind our back
    wt.close()
    wt.close()
    assert _worktrees(repo) == 1


def test_unknown_ref_and_no_repo_are_config_errors(repo: git.Repo, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no-such-branch"):
        RefWorktree(repo.working_tree_dir or "", "no-such-branch").create()
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(ConfigError, match="not inside a git repository"):
        RefWorktree(outside, "HEAD").create()
