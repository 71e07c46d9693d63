"""compare-ref on a src layout whose version module a build writes (git-ignored); a base that cannot start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from git_repo import git, init

from pytest_gpuperf.engines.compare_ref.generated import carry_generated, generated_files
from pytest_gpuperf.engines.compare_ref.worktree import RefWorktree

PACKAGE = {
    ".gitignore": "src/demo/_version.py\n__pycache__/\n*.so\n",
    "src/demo/__init__.py": "from demo._version import VERSION\n\n\ndef work(n):\n"
    "    return sum(i * i for i in range(n))\n",
    "test_perf.py": "import demo\n\n\ndef test_spin(gpu_bench):\n    gpu_bench(lambda: demo.work(20000))\n",
}
# what setuptools-scm writes at install time; git ignores it, so no checkout of a commit has it
GENERATED = {"src/demo/_version.py": 'VERSION = "1.0.dev1"\n'}
ARGS = (
    "--gpuperf", "--gpuperf-compare-ref=HEAD~1", "-p", "no:cacheprovider", "--gpuperf-confirm-pairs=0",
    "--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.4",
)  # fmt: skip


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def src_layout_repo(root: Path, *, base_extra: dict[str, str] | None = None) -> Path:
    """A src-layout package at two commits, its generated version module in the working tree only."""
    init(root)
    write(root, {**PACKAGE, "pytest.ini": "[pytest]\npythonpath = src\n", **(base_extra or {})})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    for name in base_extra or {}:
        git(root, "rm", "-q", name)
    write(root, {"README.md": "docs only\n"})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "head")
    write(root, GENERATED)
    return root


def worktrees(root: Path) -> int:
    return git(root, "worktree", "list", "--porcelain").count("worktree ")


def test_the_heads_generated_files_in_its_packages_are_carried_and_nothing_else(tmp_path: Path) -> None:
    root = src_layout_repo(tmp_path / "repo")
    write(root, {
        "src/demo/__pycache__/__init__.cpython-311.pyc": "bytecode",  # the interpreter's
        "src/demo/_speedups.so": "compiled code",  # the head's code: never measured as the base's
        "build/lib/demo/_version.py": "VERSION = 'x'\n",  # not in a package on the import path
    })  # fmt: skip
    (root / ".git" / "info" / "exclude").write_text("build/\n")
    assert generated_files(root) == ["src/demo/_version.py"]
    with RefWorktree(root, "HEAD~1") as wt:
        assert wt.path is not None and wt.carried == ("src/demo/_version.py",)
        assert (wt.path / "src/demo/_version.py").read_text() == GENERATED["src/demo/_version.py"]
        assert not (wt.path / "src/demo/_speedups.so").exists() and not (wt.path / "build").exists()


def test_a_file_the_base_tracks_is_never_replaced(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    init(root)
    write(root, {"pkg/__init__.py": "", "pkg/_version.py": "VERSION = 'tracked'\n"})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base tracks it")
    git(root, "rm", "-q", "--cached", "pkg/_version.py")
    write(root, {".gitignore": "pkg/_version.py\n", "pkg/_version.py": "VERSION = 'generated'\n"})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "head generates it")
    checkout = tmp_path / "checkout"
    git(root, "worktree", "add", "-q", "--detach", str(checkout), "HEAD~1")
    assert carry_generated(root, checkout) == []
    assert (checkout / "pkg/_version.py").read_text() == "VERSION = 'tracked'\n"


@pytest.mark.slow
def test_compare_ref_measures_a_src_layout_package_with_a_generated_version_module(pytester: pytest.Pytester) -> None:
    root = src_layout_repo(pytester.path)
    result = pytester.runpytest_subprocess(*ARGS, "--gpuperf-json=results.json", timeout=300)
    output = result.stdout.str() + result.stderr.str()
    assert "could not start" not in output and "worker is not running" not in output, output
    (time_result, *_) = json.loads((root / "results.json").read_text())["results"][0]["comparisons"]
    assert time_result["baseline"] is not None, time_result  # measured at the base too
    assert result.ret in (0, 1)  # the verdict itself is not what this test is about
    assert worktrees(root) == 1


@pytest.mark.slow
def test_a_base_that_cannot_start_is_one_usage_error_naming_the_cause(pytester: pytest.Pytester) -> None:
    root = src_layout_repo(pytester.path, base_extra={"conftest.py": "import no_such_module_at_base\n"})
    write(root, {"test_second.py": PACKAGE["test_perf.py"].replace("test_spin", "test_other")})
    result = pytester.runpytest_subprocess(*ARGS, timeout=300)
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # not 1: nothing regressed
    output = result.stdout.str() + result.stderr.str()
    assert output.count("the base worker at") == 1, output  # one error, not one per test
    assert "No module named 'no_such_module_at_base'" in output  # the worker log's end
    assert "worker is not running" not in output and "FAILED" not in output
    assert worktrees(root) == 1
