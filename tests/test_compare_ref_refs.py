"""``--gpuperf-compare-ref=REF``: any revision git accepts, resolved once; anything else a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from git_repo import git, init

from pytest_gpuperf.engines.compare_ref.worktree import BaseRef, RefWorktree, resolve_ref
from pytest_gpuperf.errors import ConfigError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: c1 (tag v1, annotated) - c2 - c3; branch feat checked out after main (so @{-1} is main)."""
    root = tmp_path / "repo"
    init(root)
    for n in (1, 2, 3):
        (root / "f.txt").write_text(f"{n}\n")
        git(root, "add", "f.txt")
        git(root, "commit", "-qm", f"c{n}")
        if n == 1:
            git(root, "tag", "-a", "v1", "-m", "release 1")
    git(root, "checkout", "-q", "-b", "feat")
    git(root, "commit", "-q", "--allow-empty", "-m", "c4")
    return root


def sha(root: Path, rev: str) -> str:
    return git(root, "rev-parse", f"{rev}^{{commit}}")


@pytest.mark.parametrize("ref", ["HEAD~2", "@{-1}", "v1", "main", "feat", "main~1", "HEAD^"])
def test_revisions_resolve_as_git_resolves_them(repo: Path, ref: str) -> None:
    base = resolve_ref(repo / ".", ref)
    assert base == BaseRef(ref, sha(repo, ref), repo)


def test_full_and_short_shas_and_a_subfolder(repo: Path) -> None:
    c2 = sha(repo, "main~1")
    (repo / "sub").mkdir()
    assert resolve_ref(repo / "sub", c2).commit == c2
    assert resolve_ref(repo, c2[:8]).commit == c2


def test_a_remote_tracking_branch_resolves(repo: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert resolve_ref(clone, "origin/main").commit == sha(repo, "main")
    # upstream shorthands (the clone is on feat, as the origin was): git knows them, GitPython's rev_parse does not
    assert resolve_ref(clone, "@{u}").commit == resolve_ref(clone, "feat@{upstream}").commit == sha(repo, "feat")


@pytest.mark.parametrize(
    "ref",
    ["no-such-branch", "-n", "--all", "HEAD^{tree}", "main..feat", "HEAD~99", "main:f.txt", "@{-5}"],
)
def test_anything_else_is_a_config_error_naming_the_ref(repo: Path, ref: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_ref(repo, ref)
    assert f"--gpuperf-compare-ref={ref}: no such commit" in str(info.value)


@pytest.mark.parametrize("ref", ["", "  "])
def test_an_empty_ref_is_a_config_error(repo: Path, ref: str) -> None:
    with pytest.raises(ConfigError, match="--gpuperf-compare-ref needs a git revision"):
        resolve_ref(repo, ref)


def test_a_resolved_ref_is_not_resolved_again(repo: Path) -> None:
    """The worktree checks out the commit resolved at the start, though the branch moved since."""
    base = resolve_ref(repo, "main")
    git(repo, "checkout", "-q", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "c5")
    git(repo, "checkout", "-q", "feat")
    with RefWorktree(repo, base) as wt:
        assert wt.commit == base.commit != sha(repo, "main")
        assert wt.path is not None and git(wt.path, "rev-parse", "HEAD") == base.commit


# -- through pytest -----------------------------------------------------------------------

PERF_TEST = "def test_spin(gpu_bench):\n    gpu_bench(lambda: sum(range(2000)))\n"


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    root = pytester.path
    init(root)
    pytester.makepyfile(test_perf=PERF_TEST)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "checkout", "-q", "-b", "feat")
    git(root, "commit", "-q", "--allow-empty", "-m", "head")
    return root


def test_an_empty_compare_ref_is_a_usage_error(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest_subprocess("--gpuperf-compare-ref=", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-compare-ref needs a git revision*"])
    result.stdout.no_fnmatch_line("*passed*")


def test_a_ref_git_rejects_is_a_usage_error_naming_it(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest_subprocess("--gpuperf-compare-ref=HEAD^{tree}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-compare-ref=HEAD^{tree}: no such commit*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_no_previous_branch_is_a_usage_error_not_an_internal_error(pytester: pytest.Pytester) -> None:
    init(pytester.path)  # a fresh repository: nothing was checked out before, so @{-1} names nothing
    pytester.makepyfile(test_perf=PERF_TEST)
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-qm", "only")
    result = pytester.runpytest_subprocess("--gpuperf-compare-ref=@{-1}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(["*--gpuperf-compare-ref=@{-1}: no such commit*"])


@pytest.mark.slow
def test_the_previous_branch_is_a_valid_ref(pytester: pytest.Pytester, project: Path, fast_args: list[str]) -> None:
    result = pytester.runpytest_subprocess(
        "--gpuperf-compare-ref=@{-1}", "--gpuperf-confirm-pairs=0", "--gpuperf-threshold=5",
        "--gpuperf-json=results.json", *fast_args, "-p", "no:cacheprovider",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    document = json.loads((project / "results.json").read_text())
    assert document["compare_ref"] == "@{-1}"
    assert document["base_provenance"]["commit"] == sha(project, "main")
