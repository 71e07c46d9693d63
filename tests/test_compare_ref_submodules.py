"""Git submodules in compare-ref's checkouts: real repositories, a real submodule made from a local repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from git_repo import git, init

from pytest_gpuperf.engines.compare_ref.headtree import head_checkout
from pytest_gpuperf.engines.compare_ref.worktree import RefWorktree
from pytest_gpuperf.errors import WorkerError

FILE_PROTOCOL = ("-c", "protocol.file.allow=always")  # git refuses file:// submodules by default (CVE-2022-39253)

SUBLIB = """
WORK = {work}


def work():
    total = 0
    for i in range(WORK):
        total += i * i
    return total
"""

PERF_TEST = """
from sublib import work


def test_work(gpu_bench):
    gpu_bench(work)
"""


def commit_all(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


def make_sublib(root: Path, work: int) -> Path:
    init(root)
    (root / "__init__.py").write_text(SUBLIB.format(work=work))
    commit_all(root, f"work {work}")
    return root


def bump(sublib: Path, project: Path, work: int) -> str:
    """A new commit of the submodule's repository, checked out and recorded in the project; the project's commit."""
    (sublib / "__init__.py").write_text(SUBLIB.format(work=work))
    commit_all(sublib, f"work {work}")
    git(project / "sublib", *FILE_PROTOCOL, "fetch", "-q", "origin")
    git(project / "sublib", "checkout", "-q", "origin/main")
    return commit_all(project, f"sublib at work {work}")


def make_project(root: Path, sublib: Path, files: dict[str, str]) -> Path:
    """A project with ``sublib`` as a submodule (from the local repository) and ``files``, committed."""
    init(root)
    git(root, *FILE_PROTOCOL, "submodule", "add", "-q", f"file://{sublib}", "sublib")
    for name, text in files.items():
        (root / name).write_text(text)
    commit_all(root, "base")
    return root


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path]:
    """(sublib's repository, the project): the project's base records sublib at 1000 steps, its head at 10000."""
    sublib = make_sublib(tmp_path / "sublib-origin", 1000)
    project = make_project(tmp_path / "project", sublib, {"test_perf.py": PERF_TEST})
    bump(sublib, project, 10000)
    return sublib, project


def test_the_base_worktree_has_the_submodule_at_the_commit_the_base_records(repos: tuple[Path, Path]) -> None:
    _, project = repos
    base_commit = git(project, "rev-parse", "HEAD~1:sublib")
    config = git(project, "config", "--list", "--local")
    with RefWorktree(project, "HEAD~1") as wt:
        assert wt.path is not None
        assert wt.submodules == ("sublib",)
        assert "WORK = 1000\n" in (wt.path / "sublib" / "__init__.py").read_text()
        assert git(wt.path / "sublib", "rev-parse", "HEAD") == base_commit
    assert git(project, "status", "--porcelain") == ""  # the user's repository is as it was
    assert git(project, "config", "--list", "--local") == config  # no submodule setting added
    assert "WORK = 10000\n" in (project / "sublib" / "__init__.py").read_text()


def test_nested_submodules_are_filled_too(tmp_path: Path) -> None:
    inner = make_sublib(tmp_path / "inner-origin", 7)
    outer = tmp_path / "outer-origin"
    init(outer)
    git(outer, *FILE_PROTOCOL, "submodule", "add", "-q", f"file://{inner}", "inner")
    commit_all(outer, "outer with inner")
    project = tmp_path / "project"
    init(project)
    git(project, *FILE_PROTOCOL, "submodule", "add", "-q", f"file://{outer}", "outer")
    git(project, *FILE_PROTOCOL, "submodule", "update", "-q", "--init", "--recursive")
    commit_all(project, "base")
    git(project, "commit", "-q", "--allow-empty", "-m", "head")
    with RefWorktree(project, "HEAD~1") as wt:
        assert wt.path is not None
        assert wt.submodules == ("outer", "outer/inner")
        assert "WORK = 7\n" in (wt.path / "outer" / "inner" / "__init__.py").read_text()


def test_an_uninitialised_submodule_stays_empty_as_at_the_head(tmp_path: Path, repos: tuple[Path, Path]) -> None:
    _, project = repos
    clone = tmp_path / "plain-clone"
    git(tmp_path, "clone", "-q", str(project), str(clone))  # no --recurse-submodules: sublib/ is empty
    git(clone, "commit", "-q", "--allow-empty", "-m", "head")
    with RefWorktree(clone, "HEAD~1") as wt:
        assert wt.path is not None and wt.submodules == ()
        assert list((wt.path / "sublib").iterdir()) == []


def strand_the_base_commit(sublib: Path, project: Path) -> str:
    """The head's copy of sublib made anew with the head's commit alone (``--depth 1``), its origin gone: the base's
    recorded commit is nowhere to be had. Returns that commit."""
    base_commit = git(project, "rev-parse", "HEAD~1:sublib")
    git(project, "submodule", "deinit", "-q", "-f", "sublib")
    shutil.rmtree(project / ".git" / "modules" / "sublib")
    git(project, *FILE_PROTOCOL, "submodule", "update", "-q", "--init", "--depth", "1", "sublib")
    shutil.rmtree(sublib)
    return base_commit


def test_a_base_commit_no_copy_holds_is_an_error_naming_the_submodule_and_what_to_run(
    repos: tuple[Path, Path],
) -> None:
    sublib, project = repos
    base_commit = strand_the_base_commit(sublib, project)
    with pytest.raises(WorkerError) as info:
        RefWorktree(project, "HEAD~1").create()
    message = str(info.value)
    assert f"the base records the submodule sublib at {base_commit[:12]}" in message
    assert f"fetching it from file://{sublib} failed" in message and f"fetch origin {base_commit}" in message
    assert git(project, "worktree", "list").count("\n") == 0  # nothing left behind


def test_the_heads_checkout_has_its_submodules_as_checked_out_with_their_changes(
    tmp_path: Path, repos: tuple[Path, Path]
) -> None:
    _, project = repos
    (project / "sublib" / "__init__.py").write_text(SUBLIB.format(work=12345))  # not committed anywhere
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    path = head_checkout(project, scratch)
    assert "WORK = 12345\n" in (path / "sublib" / "__init__.py").read_text()
    git(project, "worktree", "remove", "--force", str(path))


# -- a session -------------------------------------------------------------------------------------------

ARGS = ("--gpuperf-compare-ref=HEAD~1", "--gpuperf-confirm-pairs=0", "--gpuperf-threshold=0.5",
        "--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.4",
        "--gpuperf-busy-policy=judge", "-p", "no:cacheprovider")  # fmt: skip


@pytest.mark.slow
def test_a_slowdown_planted_in_a_submodule_fails_the_test(pytester: pytest.Pytester, tmp_path: Path) -> None:
    sublib = make_sublib(tmp_path / "sublib-origin", 2000)
    make_project(pytester.path, sublib, {"test_perf.py": PERF_TEST})
    bump(sublib, pytester.path, 20000)  # ten times the work, in the submodule only
    result = pytester.runpytest_subprocess(*ARGS, timeout=300)
    output = result.stdout.str()
    assert "No module named 'sublib'" not in output
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*performance regression in test_perf.py::test_work::default*"])


@pytest.mark.slow
def test_a_submodule_commit_the_base_cannot_have_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    sublib = make_sublib(tmp_path / "sublib-origin", 2000)
    make_project(pytester.path, sublib, {"test_perf.py": PERF_TEST})
    bump(sublib, pytester.path, 20000)
    base_commit = strand_the_base_commit(sublib, pytester.path)
    result = pytester.runpytest_subprocess(*ARGS, timeout=300)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*the base records the submodule sublib at {base_commit[:12]}*"])
    result.stdout.no_fnmatch_line("*passed*")
