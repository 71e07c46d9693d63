"""``gpuperf history ingest|changes|dashboard``: the store from the command line, its errors and exit codes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cli_helpers import run
from test_report_helpers import make_session

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


def test_the_store_comes_from_gpuperf_history_when_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
