"""``--gpuperf-compare-ref=REF``: any revision git accepts, resolved once; anything else a usage error."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from git_repo import git, init

from pytest_gpuperf.engines.compare_ref.refs import BaseRef, head_commit, resolve_ref
from pytest_gpuperf.engines.compare_ref.worktree import RefWorktree
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.report.text import plain


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


def test_the_heads_own_commit_comes_with_the_working_trees_changes(repo: Path) -> None:
    assert head_commit(resolve_ref(repo, "main")) is None  # another commit
    clean = head_commit(resolve_ref(repo, "HEAD"))
    assert clean is not None and clean.changes == ()
    git(repo, "mv", "f.txt", "renamed file.txt")
    (repo / "new.py").write_text("x = 1\n")
    changed = head_commit(resolve_ref(repo, "feat"))
    assert changed is not None and changed.changes == ("renamed file.txt", "new.py")
    assert changed.describe() == (
        "the head's own commit: only the working tree's 2 uncommitted changes (renamed file.txt, new.py) are compared"
    )


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


def test_control_characters_of_a_ref_never_reach_the_terminal_in_the_usage_error(
    pytester: pytest.Pytester, project: Path
) -> None:
    ref = "main\x1b]0;owned\x07\x1b[2J"
    result = pytester.runpytest_subprocess(f"--gpuperf-compare-ref={ref}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = "\n".join(result.outlines + result.errlines)
    assert "\x1b" not in output and "\x07" not in output, repr(output)
    # the sequences removed, as from test ids
    result.stderr.fnmatch_lines(["*--gpuperf-compare-ref=main: no such commit*"])


def test_a_ref_that_is_the_heads_own_commit_with_nothing_changed_is_a_usage_error(
    pytester: pytest.Pytester, project: Path, tmp_path: Path
) -> None:
    # CI's checkout of a push to the default branch: a --depth 1 clone where origin/main is HEAD itself
    clone = tmp_path / "ci-clone"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "main", f"file://{project}", str(clone))
    command = [sys.executable, "-m", "pytest", "--gpuperf-compare-ref=origin/main", "-p", "no:cacheprovider"]
    ran = subprocess.run(command, cwd=clone, capture_output=True, text=True, timeout=120)
    assert ran.returncode == pytest.ExitCode.USAGE_ERROR, ran.stdout + ran.stderr
    result = pytest.RunResult(ran.returncode, ran.stdout.splitlines(), ran.stderr.splitlines(), 0)
    result.stderr.fnmatch_lines([
        f"*--gpuperf-compare-ref=origin/main resolves to {sha(project, 'main')[:12]}, the head's own commit, and the "
        "working tree has no uncommitted change: the run would compare the code with itself and gate nothing*"
        f"shallow clone*git fetch --deepen=1 origin {sha(project, 'main')}*",
    ])  # fmt: skip
    result.stdout.no_fnmatch_line("*passed*")


@pytest.mark.slow
def test_a_ref_that_is_the_heads_own_commit_compares_the_uncommitted_changes_and_says_so(
    pytester: pytest.Pytester, project: Path, fast_args: list[str]
) -> None:
    pytester.makepyfile(test_perf=PERF_TEST.replace("2000", "2001"))
    with (project / ".git" / "info" / "exclude").open("a") as exclude:  # the files pytester writes for each run
        exclude.write("stdout\nstderr\nrunpytest-current\n")
    result = pytester.runpytest_subprocess("--gpuperf-compare-ref=HEAD", "--gpuperf-confirm-pairs=0",
                                           "--gpuperf-threshold=5", *fast_args, "-p", "no:cacheprovider")  # fmt: skip
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([
        f"gpuperf: compare-ref mode on * against HEAD ({sha(project, 'HEAD')[:12]}, the head's own commit: only the "
        "working tree's 1 uncommitted change (test_perf.py) are compared)",
    ])  # fmt: skip


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


# -- what to fetch where a clone lacks the ref -----------------------------------------------


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    """main: c1 (annotated tag v1) .. c4; feature: c4 + f1 (never fetched by a clone of main)."""
    root = tmp_path / "upstream"
    init(root)
    for n in (1, 2, 3, 4):
        (root / "f.txt").write_text(f"{n}\n")
        git(root, "add", "f.txt")
        git(root, "commit", "-qm", f"c{n}")
        if n == 1:
            git(root, "tag", "-a", "v1", "-m", "release 1")
    git(root, "checkout", "-q", "-b", "feature")
    git(root, "commit", "-q", "--allow-empty", "-m", "f1")
    git(root, "checkout", "-q", "main")
    return root


def clone(upstream: Path, *options: str) -> Path:
    """A clone of main as CI makes one (``--depth 1`` implies ``--single-branch``)."""
    target = upstream.parent / f"clone{len(list(upstream.parent.iterdir()))}"
    git(upstream.parent, "clone", "-q", *options, "--single-branch", f"file://{upstream}", str(target))
    return target


def hint(root: Path, ref: str) -> str:
    with pytest.raises(ConfigError) as info:
        resolve_ref(root, ref)
    return str(info.value)


def run_command(root: Path, text: str, which: int = 0) -> None:
    """Run the ``which``-th ``git fetch ...`` command the hint gives, as a user would paste it."""
    commands = re.findall(r"git fetch [^,;)]*", text)
    assert len(commands) > which, text
    subprocess.run(shlex.split(commands[which]), cwd=root, check=True, capture_output=True)


SHALLOW, FULL = ("--depth", "1"), ()  # a full clone of main fetched its tags, v1 among them
BRANCH_AND_TAG_REFS = [
    (depth, ref, which, then, upstream_name)
    for ref, which, then, upstream_name, depths in [
        ("origin/feature", 0, "origin/feature", "feature", (SHALLOW, FULL)),
        ("refs/remotes/origin/feature", 0, "origin/feature", "feature", (SHALLOW, FULL)),
        ("feature", 0, "origin/feature", "feature", (SHALLOW, FULL)),
        ("v1", 1, "v1", "v1", (SHALLOW,)),
        ("refs/tags/v1", 0, "v1", "v1", (SHALLOW,)),
    ]
    for depth in depths
]


@pytest.mark.parametrize(("depth", "ref", "which", "then", "upstream_name"), BRANCH_AND_TAG_REFS)
def test_the_hint_for_a_branch_or_tag_of_the_remote_is_a_command_that_brings_it(
    upstream: Path, depth: tuple[str, ...], ref: str, which: int, then: str, upstream_name: str
) -> None:
    root = clone(upstream, *depth)
    text = hint(root, ref)
    assert "--deepen=50" not in text and "--unshallow" not in text  # the refspec would still name main alone
    assert ("--depth=1" in text) == bool(depth), text
    run_command(root, text, which)
    assert resolve_ref(root, then).commit == sha(upstream, upstream_name)


def test_the_hint_for_a_commit_hash_fetches_it_by_its_full_hash(upstream: Path) -> None:
    root = clone(upstream, "--depth", "1")
    commit = sha(upstream, "main~2")
    run_command(root, hint(root, commit))
    assert resolve_ref(root, commit).commit == commit
    assert "abbreviated hash cannot be fetched" in hint(root, sha(upstream, "main~1")[:10])


@pytest.mark.parametrize("ref", ["HEAD~1", "HEAD~3", "main^", "HEAD^^"])
def test_the_hint_for_history_a_shallow_clone_lacks_deepens_it_from_the_commit_it_counts_from(
    upstream: Path, ref: str
) -> None:
    root = clone(upstream, "--depth", "1")
    text = hint(root, ref)
    assert "git fetch origin -- " not in text, text
    run_command(root, text)
    assert resolve_ref(root, ref).commit == sha(upstream, ref.replace("HEAD", "main"))


def test_the_hint_for_a_detached_head_deepens_the_commit_not_a_branch(upstream: Path) -> None:
    # actions/checkout of a pull request: a detached merge commit, on no branch the refspec names
    root = clone(upstream, "--depth", "1")
    feature = sha(upstream, "feature")
    git(root, "fetch", "-q", "--depth=1", "origin", feature)
    git(root, "checkout", "-q", "--detach", feature)
    run_command(root, hint(root, "HEAD~2"))
    assert resolve_ref(root, "HEAD~2").commit == sha(upstream, "feature~2")


def test_history_a_full_clone_does_not_have_is_said_so_without_a_command(repo: Path) -> None:
    text = hint(repo, "HEAD~99")
    assert "fewer than 99 commit(s) before it" in text and "git fetch" not in text


def test_a_repository_without_a_remote_says_so_instead_of_a_command(repo: Path) -> None:
    text = hint(repo, "no-such-branch")
    assert "has no remote to fetch it from" in text and "git fetch" not in text


@pytest.mark.parametrize("ref", ["--upload-pack=touch /tmp/x", "main; rm -rf ~", "main\x1b]0;title\x07", "@{-1}"])
def test_a_ref_no_remote_could_have_gets_no_command(upstream: Path, ref: str) -> None:
    root = clone(upstream, "--depth", "1")
    text = hint(root, ref)
    assert ("no fetch can bring it" in text or "holds control characters" in text) and "git fetch" not in text, text


@pytest.mark.parametrize("ref", ["main\x1b[31m", "x\x1b]52;c;cHduZWQ=\x07y", "feat\x9b1mure", "a\rb"])
def test_control_characters_of_a_ref_never_reach_the_message(upstream: Path, ref: str) -> None:
    root = clone(upstream, "--depth", "1")
    text = hint(root, ref)
    assert plain(text) == text, repr(text)
    assert plain(ref) in text
