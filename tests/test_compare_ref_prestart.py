"""The compare-ref worktree and zygote started before the head collects (engines/compare_ref/prestart.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_gpuperf.engines.compare_ref.prestart import start_early

pytestmark = pytest.mark.slow

ARGS = (
    "--gpuperf", "--gpuperf-compare-ref=HEAD~1", "-p", "no:cacheprovider", "--gpuperf-confirm-pairs=0",
    "--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.4", "--gpuperf-threshold=0.5",
)  # fmt: skip

# Runs in the head after our earliest hook and before collection ends: which of the head's
# child processes exist by then (Linux /proc), written to children.json.
CHILDREN_CONFTEST = """
import json, os
from pathlib import Path

def pytest_collection_modifyitems(config, items):
    mine = str(os.getpid())
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\\0")
        except OSError:
            continue
        if fields[1] == mine:
            children.append([c.decode(errors="replace") for c in cmdline[:2]])
    Path("children.json").write_text(json.dumps(children))
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def commit_twice(root: Path, files: dict[str, str]) -> None:
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    for name, text in files.items():
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "commit", "-q", "--allow-empty", "-m", "head")


def worktrees(root: Path) -> int:
    return git(root, "worktree", "list", "--porcelain").count("worktree ")


def test_an_early_zygote_waits_for_work_and_ends_with_its_worktree_on_close(tmp_path: Path) -> None:
    commit_twice(tmp_path, {"f.txt": "x\n"})
    early = start_early(tmp_path, "HEAD~1")
    assert early is not None
    assert worktrees(tmp_path) == 2
    time.sleep(0.5)
    zygote = early.zygote.process
    assert zygote is not None
    assert zygote.poll() is None  # imported torch (or still does), waits to fork the base worker
    early.close()
    assert zygote.returncode == 0
    assert worktrees(tmp_path) == 1
    assert early.worktree.path is not None and not early.worktree.path.exists()
    early.close()  # a second close does nothing


def test_an_early_zygote_handed_over_is_not_closed_by_its_first_owner(tmp_path: Path) -> None:
    commit_twice(tmp_path, {"f.txt": "x\n"})
    early = start_early(tmp_path, "HEAD~1")
    assert early is not None
    worktree, zygote = early.hand_over()
    early.close()
    process = zygote.process
    assert process is not None
    assert process.poll() is None and worktrees(tmp_path) == 2
    zygote.close()  # the new owner's
    assert process.returncode == 0
    worktree.close()
    assert worktrees(tmp_path) == 1


def test_no_early_worker_for_an_unknown_ref_and_nothing_left_behind(tmp_path: Path) -> None:
    commit_twice(tmp_path, {"f.txt": "x\n"})
    assert start_early(tmp_path, "no-such-ref") is None
    assert worktrees(tmp_path) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_base_worker_runs_before_the_head_has_collected_and_measures(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # run by an xdist worker, this test's pytest would inherit its variable and start no early worker
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    root = pytester.path
    commit_twice(root, {
        "test_perf.py": "def test_spin(gpu_bench):\n    gpu_bench(lambda: sum(range(3000)))\n",
        "conftest.py": CHILDREN_CONFTEST,
    })  # fmt: skip
    result = pytester.runpytest_subprocess(*ARGS, "--gpuperf-json=results.json")
    assert result.ret == 0, result.stdout.str()
    children = json.loads((root / "children.json").read_text())
    assert [c for c in children if c[1:] == ["-c"]], children  # the zygote, started before collection ended
    (comparison, *_) = json.loads((root / "results.json").read_text())["results"][0]["comparisons"]
    assert comparison["verdict"] == "unchanged", comparison  # measured against the base worker it forked
    assert worktrees(root) == 1


def test_an_early_worker_a_session_never_needs_is_stopped(pytester: pytest.Pytester) -> None:
    root = pytester.path
    commit_twice(root, {"test_plain.py": "def test_plain():\n    assert True\n"})
    result = pytester.runpytest_subprocess(*ARGS)
    assert result.ret == 0, result.stdout.str()
    assert worktrees(root) == 1
