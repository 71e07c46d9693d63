"""The head's confirmation workers run from a worktree of the head's working tree (engines/compare_ref/headtree.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pytest_gpuperf.engines.compare_ref.headtree import HEADTREE_NAME, head_checkout
from pytest_gpuperf.workers.leftovers import WORKTREE_NAME


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_the_head_checkout_holds_the_working_tree_and_has_the_base_worktrees_shape(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    for name, text in {"kept.py": "A = 1\n", "edited.py": "B = 1\n", "deleted.py": "C = 1\n",
                       "staged.py": "D = 1\n", ".gitignore": "build/\n"}.items():  # fmt: skip
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "head")
    (repo / "edited.py").write_text("B = 2\n")
    (repo / "deleted.py").unlink()
    (repo / "staged.py").write_text("D = 2\n")
    git(repo, "add", "staged.py")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "new.py").write_text("E = 1\n")
    (repo / "build").mkdir()
    (repo / "build" / "ignored.so").write_text("binary\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    checkout = head_checkout(repo, scratch)

    assert checkout == scratch / HEADTREE_NAME and len(HEADTREE_NAME) == len(WORKTREE_NAME)
    assert (checkout / ".git").is_file()  # a worktree, like the base's: not the clone's .git folder
    assert (checkout / "kept.py").read_text() == "A = 1\n"
    assert (checkout / "edited.py").read_text() == "B = 2\n"
    assert (checkout / "staged.py").read_text() == "D = 2\n"
    assert (checkout / "pkg" / "new.py").read_text() == "E = 1\n"
    assert not (checkout / "deleted.py").exists()
    assert not (checkout / "build").exists()  # ignored files are in neither side's checkout
    assert git(repo, "status", "--porcelain").count("\n") == 4  # the user's tree is untouched
