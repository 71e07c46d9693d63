"""``gpuperf history changes`` on series too short to tell: it says so rather than "no change points"."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import run

from pytest_gpuperf.cli import EXIT_OK
from pytest_gpuperf.history.model import RecordedValue, RunRecord
from pytest_gpuperf.history.store import open_store


def _store(url: str, runs: int, tests: dict[str, int]) -> None:
    """``runs`` commits; each test recorded in the newest ``tests[test]`` of them."""
    with open_store(url) as store:
        for i in range(runs):
            values = tuple(
                RecordedValue(test, "default", "time.p50", 1e6 * (1 + 0.001 * (i % 3)), "ns")
                for test, recorded in tests.items()
                if i >= runs - recorded
            )
            day = f"2026-04-{i + 1:02d}"
            store.record(RunRecord(f"run-{i}", f"{i:02d}".ljust(40, "c"), "main", f"{day}T12:00:00+00:00", "r1",
                                   "cpu-x", "baseline", {}, values, commit_date=f"{day}T10:00:00+00:00"))  # fmt: skip


def test_a_store_of_a_few_runs_is_too_short_to_say_anything(tmp_path: Path) -> None:
    url = str(tmp_path / "h.db")
    _store(url, 4, {"t.py::test_a": 4})
    code, out, _ = run("history", "changes", "--history", url)
    assert code == EXIT_OK
    assert out == "too short to say anything: every series has fewer than 6 runs\n"
    _, out, _ = run("history", "changes", "--history", url, "--format", "markdown")
    assert "too short to say anything" in out and "No change points" not in out
    _, out, err = run("history", "changes", "--history", url, "--format", "json")
    assert out == "[]\n" and "too short to say anything" in err


def test_the_short_measurements_are_named_beside_the_others(tmp_path: Path) -> None:
    url = str(tmp_path / "h.db")
    _store(url, 12, {"t.py::test_old": 12, "t.py::test_new": 3})
    _, out, _ = run("history", "changes", "--history", url)
    assert out.splitlines() == [
        "no change points",
        "too short to tell (fewer than 6 runs): 1 measurement(s): t.py::test_new::default [cpu-x, main]",
    ]
