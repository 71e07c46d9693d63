"""``gpuperf history ingest|changes|dashboard``: the store from the command line, its errors and exit codes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cli_helpers import run
from test_report_helpers import make_session
from test_report_history import history_repo  # noqa: F401  (a git repository of baseline versions)

from pytest_gpuperf.cli import EXIT_INVALID_INPUT, EXIT_OK, EXIT_USAGE
from pytest_gpuperf.history.store import open_store
from pytest_gpuperf.report.results_json import write_results


def test_ingest_stores_good_files_refuses_a_bad_one_and_exits_3(tmp_path: Path, store_url: str) -> None:
    good = write_results(tmp_path / "good.json", make_session())
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    code, out, err = run("history", "ingest", "--history", store_url, str(good), str(bad))
    assert code == EXIT_INVALID_INPUT
    assert f"stored {good}" in out and "1 stored, 0 already stored, 1 refused" in out
    assert f"refused results file {bad}: not JSON" in err
    with open_store(store_url) as store:
        assert store.count_runs() == 1
    code, out, _ = run("history", "ingest", "--history", store_url, str(good))
    assert code == EXIT_OK and f"already stored {good}" in out


def test_the_store_comes_from_gpuperf_history_when_not_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = write_results(tmp_path / "good.json", make_session())
    monkeypatch.delenv("GPUPERF_HISTORY", raising=False)
    code, _, err = run("history", "ingest", str(good))
    assert code == EXIT_USAGE and "give --history URL or set GPUPERF_HISTORY" in err
    monkeypatch.setenv("GPUPERF_HISTORY", str(tmp_path / "env.db"))
    assert run("history", "ingest", str(good))[0] == EXIT_OK
    with open_store(str(tmp_path / "env.db")) as store:
        assert store.count_runs() == 1


def test_an_unreachable_store_is_a_clear_error_within_seconds(tmp_path: Path) -> None:
    good = write_results(tmp_path / "good.json", make_session())
    started = time.monotonic()
    for command in (["ingest", str(good)], ["changes"], ["dashboard", "--out", str(tmp_path / "site")]):
        code, out, err = run("history", *command, "--history", "postgresql://perf:pw-53cr3t@127.0.0.1:1/perf")
        assert code == EXIT_INVALID_INPUT, (command, err)
        assert err.startswith("gpuperf history: history store postgresql+psycopg://perf:***@127.0.0.1:1/perf: ")
        assert "pw-53cr3t" not in out + err
    assert time.monotonic() - started < 60
    assert not (tmp_path / "site").exists()


def test_ingest_needs_something_to_ingest(tmp_path: Path) -> None:
    code, _, err = run("history", "ingest", "--history", str(tmp_path / "h.db"))
    assert code == EXIT_USAGE and "give results files, --baselines DIR, or both" in err


def test_a_store_written_by_a_newer_version_is_refused(tmp_path: Path) -> None:
    import sqlalchemy

    url = str(tmp_path / "h.db")
    with open_store(url) as store, store.engine.begin() as conn:
        conn.execute(sqlalchemy.text("UPDATE gpuperf_alembic_version SET version_num = '0042'"))
    code, _, err = run("history", "changes", "--history", url)
    assert code == EXIT_INVALID_INPUT and "written by a newer pytest-gpuperf" in err
    assert "Traceback" not in err


def _step_store(url: str) -> list[str]:
    """20 commits; test_step's median rises 30% at commit 12 (runs of 1% noise), test_flat never moves."""
    import random

    from pytest_gpuperf.history.model import RecordedValue, RunRecord

    rng = random.Random(7)
    commits = [f"{i:02d}".ljust(40, "c") for i in range(20)]
    with open_store(url) as store:
        for i, commit in enumerate(commits):
            level = 1.3e6 if i >= 12 else 1.0e6
            values = []
            for test, centre in (("t.py::test_step", level), ("t.py::test_flat", 2.0e6)):
                v = centre * (1 + rng.gauss(0, 0.01))
                values.append(RecordedValue(test, "default", "time.p50", v, "ns", ci_low=v * 0.99, ci_high=v * 1.01,
                                            p10=v * 0.97, p90=v * 1.03, samples=60))  # fmt: skip
            day = f"2026-04-{i + 1:02d}"
            store.record(RunRecord(f"run-{i}", commit, "main", f"{day}T12:00:00+00:00", "r1", "cpu-x", "baseline", {},
                                   tuple(values), commit_date=f"{day}T10:00:00+00:00"))  # fmt: skip
    return commits


def test_changes_names_the_commit_range_and_exits_1_for_a_recent_regression(tmp_path: Path, store_url: str) -> None:
    commits = _step_store(store_url)
    code, out, err = run("history", "changes", "--history", store_url, "--format", "json")
    assert code == EXIT_OK, err  # the step is 8 runs old: older than --recent 3
    [change] = json.loads(out)
    assert (change["test"], change["statistic"], change["kind"]) == ("t.py::test_step", "time.p50", "regression")
    assert (change["last_good"], change["first_bad"]) == (commits[11], commits[12])
    assert change["device_class"] == "cpu-x" and change["branch"] == "main"
    code, _, err = run("history", "changes", "--history", store_url, "--recent", "8")
    assert code == 1
    assert f"new regression t.py::test_step::default time.p50 [cpu-x, main]: first bad {commits[12][:12]}" in err
    # --since: a date or a commit; the detector still sees the whole series
    assert json.loads(run("history", "changes", "--history", store_url, "--format", "json", "--since",
                          "2026-04-14")[1]) == []  # fmt: skip
    assert len(json.loads(run("history", "changes", "--history", store_url, "--format", "json", "--since",
                              commits[12][:10])[1])) == 1  # fmt: skip
    code, _, err = run("history", "changes", "--history", store_url, "--since", "nonsense")
    assert code == EXIT_INVALID_INPUT and "--since 'nonsense' is neither an ISO 8601 date nor a commit" in err
    # filters
    assert json.loads(run("history", "changes", "--history", store_url, "--format", "json", "-k", "flat")[1]) == []
    assert json.loads(run("history", "changes", "--history", store_url, "--format", "json", "--device-class",
                          "cuda-h100")[1]) == []  # fmt: skip
    code, out, _ = run("history", "changes", "--history", store_url, "--format", "markdown")
    assert code == EXIT_OK and "test_step" in out and commits[12][:7] in out
    output = tmp_path / "changes.txt"
    assert run("history", "changes", "--history", store_url, "--output", str(output))[0] == EXIT_OK
    assert "test_step" in output.read_text()


def test_dashboard_writes_a_site_of_the_stores_series(tmp_path: Path) -> None:
    url = str(tmp_path / "h.db")
    _step_store(url)
    code, out, err = run("history", "dashboard", "--history", url, "--out", str(tmp_path / "site"), "--title", "Perf")
    assert code == EXIT_OK, err
    assert "dashboard of 2 series, 1 change points written to" in out
    index = (tmp_path / "site" / "index.html").read_text()
    assert "Perf" in index and "test_step" in index and "test_flat" in index


def test_the_dashboard_links_a_recorded_profile_diff(tmp_path: Path) -> None:
    from test_report_profile_helpers import cpu_extra_op_diff, regressed, session_of

    url = str(tmp_path / "h.db")
    results = write_results(tmp_path / "r.json", session_of(regressed(cpu_extra_op_diff(), "t.py::test_x")))
    assert run("history", "ingest", "--history", url, str(results))[0] == EXIT_OK
    assert run("history", "dashboard", "--history", url, "--out", str(tmp_path / "site"))[0] == EXIT_OK
    [page] = (tmp_path / "site" / "diffs").glob("*.html")
    assert "Why it got slower" in page.read_text()


def test_ingest_of_the_baselines_git_history(
    history_repo: tuple[Path, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    root, shas = history_repo
    url = str(tmp_path / "h.db")
    code, out, _ = run("history", "ingest", "--history", url, "--baselines", str(root))
    assert code == EXIT_OK and f"stored {len(shas)} of {len(shas)} baseline versions from {root}" in out
    code, out, _ = run("history", "ingest", "--history", url, "--baselines", str(root))
    assert code == EXIT_OK and f"stored 0 of {len(shas)} baseline versions" in out
    outside = tmp_path / "not-git"
    outside.mkdir()
    code, _, err = run("history", "ingest", "--history", url, "--baselines", str(outside))
    assert code == EXIT_INVALID_INPUT and "not inside a git repository" in err
