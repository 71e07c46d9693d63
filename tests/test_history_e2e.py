"""The history end to end: a perf suite run at each commit of a real git repository, recorded on SQLite,
its results files ingested into PostgreSQL; both stores give the same change points, at the planted commit.

One test function slows down (ten times the work) at a planted commit; the others never change.
The sessions run on whatever load the machine has: a loaded host preempts calls, which moves a
session's mean and tails by up to several times (a 160 us call read a mean of 160-1000 us), and
shifts the level of a memory-bound test's median. Ten times the work keeps the planted change
clear of all of that, so what is checked does not depend on the load: the planted commit named
exactly by the median and the minimum, and by the mean as its one change of the planted size;
no change of that size under another test's name.
Slow (a pytest session per commit): marked ``slow``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from postgres_server import fresh_database

from pytest_gpuperf.history.ingest import ingest_files
from pytest_gpuperf.history.model import ChangeKind
from pytest_gpuperf.history.store import SeriesFilter, open_store

COMMITS = 14
PLANTED = 8  # the commit (0-based) where test_planted gets slower
REPS, PLANTED_REPS = 4, 40  # test_planted's work before and from PLANTED
# A change this large (a factor, either way) is the planted one's size: at least the square root
# of its factor of ten, and more than a loaded host moved any statistic of these tests.
PLANTED_SIZE = 3.0

SUITE = """
import torch
from work import PLANTED_REPS

A = torch.randn(96, 96) / 10
B = torch.randn(4096)

def chain(reps):
    x = A
    for _ in range(reps):
        x = torch.tanh(x @ A)
    return x

def test_steady_chain(gpu_bench):
    gpu_bench(chain, 4)

def test_steady_sort(gpu_bench):
    gpu_bench(torch.sort, B)

def test_planted(gpu_bench):
    gpu_bench(chain, PLANTED_REPS)
"""
BUDGET = ["--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.15", "--gpuperf-max-time=0.4", "-p", "no:cacheprovider"]


def git(root: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": date or "", "GIT_COMMITTER_DATE": date or ""} if date else None
    done = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


@pytest.mark.slow
def test_sqlite_sessions_and_postgres_ingest_find_the_planted_commit(tmp_path: Path, postgres_server: str) -> None:
    from pytest_gpuperf.history.detect import DetectorConfig, find_changes

    # This machine's load comes and goes with other jobs, so which runs it measured busy is not
    # the test's to choose: every run is judged here; busy runs left out are tests/test_history_busy.py.
    every_run = DetectorConfig(leave_out_busy=False)

    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "test_suite.py").write_text(SUITE)
    (root / "conftest.py").write_text("import torch\ntorch.set_num_threads(1)\n")
    (root / "pytest.ini").write_text("[pytest]\n")
    sqlite_url = f"sqlite:///{tmp_path / 'sessions.db'}"
    results, commits = [], []
    for i in range(COMMITS):
        (root / "work.py").write_text(f"PLANTED_REPS = {PLANTED_REPS if i >= PLANTED else REPS}\n")
        (root / "CHANGES").write_text(f"change {i}\n")
        git(root, "add", "-A")
        git(root, "commit", "-qm", f"commit {i}", date=f"2026-02-{i + 1:02d}T12:00:00+00:00")
        commits.append(git(root, "rev-parse", "HEAD"))
        out = tmp_path / f"results-{i:02d}.json"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "--gpuperf", f"--gpuperf-history={sqlite_url}",
             f"--gpuperf-json={out}", *BUDGET],
            cwd=root, capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "gpuperf: recorded run" in done.stdout
        results.append(out)

    with fresh_database(postgres_server) as postgres_url, open_store(postgres_url) as pg:
        outcome = ingest_files(pg, results)
        assert len(outcome.stored) == COMMITS and not outcome.refused
        pg_series = pg.load_series(SeriesFilter(statistic="time."))
    with open_store(sqlite_url) as lite:
        lite_series = lite.load_series(SeriesFilter(statistic="time."))

    def changes(series: list) -> dict:  # type: ignore[type-arg]
        return {s.key: [(c.last_good, c.first_bad, c.kind) for c in find_changes(s, every_run)] for s in series}

    assert [[p.run_id for p in s.points] for s in lite_series] == [[p.run_id for p in s.points] for s in pg_series]
    assert [[p.busy for p in s.points] for s in lite_series] == [[p.busy for p in s.points] for s in pg_series]
    from_sessions, from_files = changes(lite_series), changes(pg_series)
    assert from_sessions == from_files  # the same runs, the same change points, whichever store
    tests = ("test_steady_chain", "test_steady_sort", "test_planted")
    assert {s.key.test for s in lite_series} == {f"test_suite.py::{t}" for t in tests}
    for series in lite_series:
        key, found = series.key, from_sessions[series.key]
        assert len(series.points) == COMMITS
        if key.test.endswith("test_planted") and key.statistic in ("time.p50", "time.min"):
            assert found == [(commits[PLANTED - 1], commits[PLANTED], ChangeKind.REGRESSION)], (key.label, found)
        elif key.test.endswith("test_planted") and key.statistic == "time.mean":
            # The mean carries a session's preempted calls: on a loaded host it follows the load,
            # and a shift of the load is a real change of the mean that the detector may name. The
            # planted change is its one change of the planted size; a disturbed run just before the
            # step can make it read as a short slide onto the planted commit, never past it.
            (planted,) = [c for c in find_changes(series, every_run) if _factor(c.change) >= PLANTED_SIZE]
            assert planted.first_bad == commits[PLANTED] and planted.kind is ChangeKind.REGRESSION, (key.label, found)
            assert planted.last_good in commits[PLANTED - 3 : PLANTED], (key.label, found)
        elif not key.test.endswith("test_planted"):
            # Every statistic follows the host: a shared machine whose calls got slower for the rest
            # of the run is a real level shift, and the detector names it (how often flat series stay
            # free of change points is measured in benchmarks/history_detection.py). What may not
            # show is the planted test's work under another test's name.
            sizes = [c.change for c in find_changes(series, every_run)]
            assert all(_factor(x) < PLANTED_SIZE for x in sizes), (key.label, sizes)


def _factor(change: float) -> float:
    """A relative change as a factor either way: +200% and -67% are both 3."""
    return max(1 + change, 1 / (1 + change))
