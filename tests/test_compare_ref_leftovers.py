"""Scratch folders and worktrees of killed runs are found by their dead owner and removed (workers/leftovers.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gpuperf.engines.compare_ref.worktree import RefWorktree
from pytest_gpuperf.workers.leftovers import (
    OWNER_FILE,
    REF_PREFIX,
    REMEASURE_PREFIX,
    WORKTREE_NAME,
    make_scratch,
    owner_alive,
    process_start_time,
    read_owner,
    record_owner,
    remove_abandoned,
)

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times from Linux /proc")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "f.txt").write_text("base\n")
    git(root, "add", "f.txt")
    git(root, "commit", "-qm", "base")
    git(root, "commit", "-q", "--allow-empty", "-m", "head")
    return root


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def kill(proc: subprocess.Popen[bytes] | subprocess.Popen[str], *, reap: bool = True) -> None:
    proc.send_signal(signal.SIGKILL)
    if reap:
        proc.wait(timeout=30)
    else:  # wait until it has died, but leave it unreaped: a zombie
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    if proc.stdout is not None:
        proc.stdout.close()


def worktree_paths(root: Path) -> list[str]:
    listing = git(root, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")]


def owned_folder(root: Path, prefix: str, pid: int) -> Path:
    folder = root / f"{prefix}test"
    folder.mkdir(parents=True)
    (folder / "some.log").write_text("log\n")
    record_owner(folder, pid=pid)
    return folder


def test_the_owner_file_records_pid_and_start_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the temporary directory, here
    folder = make_scratch(REMEASURE_PREFIX)
    assert folder.parent == tmp_path and folder.name.startswith(REMEASURE_PREFIX)
    owner = read_owner(folder)
    assert owner is not None and owner.pid == os.getpid()
    assert owner.start_time == process_start_time(os.getpid()) is not None
    assert json.loads((folder / OWNER_FILE).read_text())["pid"] == os.getpid()
    assert owner_alive(owner)
    assert remove_abandoned() == []  # our own folder stays
    assert folder.exists()


def test_a_killed_owners_folder_is_removed_a_live_ones_kept(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    dead = owned_folder(tmp_path / "a", REMEASURE_PREFIX, victim.pid)
    live = owned_folder(tmp_path / "b", REMEASURE_PREFIX, sleeper.pid)
    kill(victim)
    assert remove_abandoned(tmp_path / "a") == [dead]
    assert remove_abandoned(tmp_path / "b") == []
    assert not dead.exists()
    assert (live / "some.log").exists()


def test_a_killed_owner_not_yet_reaped_is_gone_too(tmp_path: Path) -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    folder = owned_folder(tmp_path, REMEASURE_PREFIX, victim.pid)
    kill(victim, reap=False)  # a zombie until its parent (this test) waits for it
    try:
        assert remove_abandoned(tmp_path) == [folder]
    finally:
        victim.wait(timeout=30)


def test_a_reused_pid_is_not_the_owner(tmp_path: Path) -> None:
    folder = tmp_path / f"{REMEASURE_PREFIX}reused"
    folder.mkdir()
    start = process_start_time(os.getpid())
    assert start is not None
    # our pid, alive, but not the process that made the folder: that one started earlier
    (folder / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "start_time": start - 1, "repo": None}))
    assert remove_abandoned(tmp_path) == [folder]


def test_folders_without_an_owner_file_or_of_other_names_are_left_alone(tmp_path: Path) -> None:
    being_made = tmp_path / f"{REF_PREFIX}new"
    being_made.mkdir()
    other = tmp_path / "gpuperf-profiles"
    other.mkdir()
    victim = subprocess.Popen([sys.executable, "-c", "pass"])
    victim.wait()
    record_owner(other, pid=victim.pid)
    assert remove_abandoned(tmp_path) == []
    assert being_made.exists() and other.exists()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pytest_gpuperf.engines.compare_ref.worktree import RefWorktree

    wt = RefWorktree(sys.argv[1], "HEAD~1").create()
    print(wt.tmp_dir, flush=True)
    time.sleep(300)
    """
)


def start_holder(tmp_path: Path, repo: Path, tmpdir: Path) -> tuple[subprocess.Popen[str], Path]:
    """A real process that makes a compare-ref worktree (in TMPDIR ``tmpdir``) and keeps it."""
    tmpdir.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(repo)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmpdir)},
    )
    assert proc.stdout is not None
    folder = Path(proc.stdout.readline().strip())
    assert folder.parent == tmpdir and (folder / WORKTREE_NAME / "f.txt").exists(), folder
    return proc, folder


def test_a_sigkilled_runs_worktree_is_removed_by_the_cleanup(tmp_path: Path, repo: Path) -> None:
    proc, folder = start_holder(tmp_path, repo, tmp_path / "tmp")
    kill(proc)
    git(repo, "worktree", "prune")  # what git offers keeps it: the folder still exists
    assert str(folder / WORKTREE_NAME) in worktree_paths(repo)
    assert remove_abandoned(tmp_path / "tmp") == [folder]
    assert not folder.exists()
    assert worktree_paths(repo) == [str(repo)]


def test_the_next_compare_ref_run_removes_it_whatever_its_tmpdir(tmp_path: Path, repo: Path) -> None:
    killed, killed_folder = start_holder(tmp_path, repo, tmp_path / "elsewhere")
    live, live_folder = start_holder(tmp_path, repo, tmp_path / "tmp")
    try:
        kill(killed)
        with RefWorktree(repo, "HEAD~1") as wt:  # the next run, with the default temporary directory
            paths = worktree_paths(repo)
            assert str(killed_folder / WORKTREE_NAME) not in paths
            assert str(live_folder / WORKTREE_NAME) in paths  # a live run's is never touched
            assert wt.path is not None and str(wt.path) in paths
        assert not killed_folder.exists()
        assert (live_folder / WORKTREE_NAME / "f.txt").exists()
    finally:
        kill(live)
    remove_abandoned(tmp_path / "tmp", repo)
    assert worktree_paths(repo) == [str(repo)]
