"""``gpuperf history ingest|changes|dashboard``: the store from the command line, its errors and exit codes."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

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


# --- credentials, missing stores, bad files and non-finite values --------------------------------


def _query_password_url(url: str, port: int | None = None) -> str:
    """``url`` with its credentials as query parameters (a server on trust auth accepts and ignores them)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if port is not None:
        parsed = parsed.set(port=port)
    return parsed.render_as_string(hide_password=False) + "?password=pw-qu3ry-secret&sslpassword=ssl-s3cret-pw"


SECRETS = ("pw-qu3ry-secret", "ssl-s3cret-pw")


def test_a_password_given_as_a_query_parameter_is_never_printed(tmp_path: Path, postgres_server: str) -> None:
    from postgres_server import fresh_database

    from pytest_gpuperf.history.record import StoreAddress, record_session

    good = write_results(tmp_path / "good.json", make_session())
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    with fresh_database(postgres_server) as plain:
        url = _query_password_url(plain)
        code, out, err = run("history", "ingest", "--history", url, str(good), str(bad))
        assert code == EXIT_INVALID_INPUT, err
        assert "password=***" in out and "sslpassword=***" in out
        code, out2, err2 = run("history", "changes", "--history", url, "--since", "nonsense")
        assert code == EXIT_INVALID_INPUT and "password=***" in err2
        later = dataclasses.replace(make_session(), started_at="2026-02-02T00:00:00+00:00")
        line = record_session(StoreAddress(url, "GPUPERF_HISTORY"), later)
        assert line.startswith("gpuperf: recorded run ") and "password=***" in line
        texts = [out, err, out2, err2, line]
    unreachable = _query_password_url(plain, port=1)
    for command in (["ingest", str(good)], ["changes"], ["dashboard", "--out", str(tmp_path / "site")]):
        code, out, err = run("history", *command, "--history", unreachable)
        assert code == EXIT_INVALID_INPUT and "password=***" in err, err
        texts += [out, err]
    assert not any(secret in text for secret in SECRETS for text in texts)


@pytest.mark.parametrize(
    ("address", "shown"),
    [
        ("postgresql://perf@db/perf?password=s3cr3t", "postgresql://perf@db/perf?password=***"),
        ("postgresql://perf:s3cr3t@db/perf?sslmode=require&sslpassword=s3cr3t&passfile=/x/s3cr3t",
         "postgresql://perf:***@db/perf?sslmode=require&sslpassword=***&passfile=***"),
        ("postgresql://db/perf?PASSWORD=s3cr3t&api_token=s3cr3t&application_name=ok",
         "postgresql://db/perf?PASSWORD=***&api_token=***&application_name=ok"),
        ("mysql://u:s3cr3t@h/db?password=s3cr3t", "mysql://u:***@h/db?password=***"),
        ("mysql://u:s3cr@t@h/db", "mysql://u:***@h/db"),
        ("mysql://u@x:s3cr3t@h/db", "mysql://u@x:***@h/db"),  # an unencoded '@' in the user name
        ("mysql://u:s3 cr3t@h/db", "mysql://u:***@h/db"),
    ],
)  # fmt: skip
def test_redact_hides_every_credential_an_address_can_carry(address: str, shown: str) -> None:
    from pytest_gpuperf.history.url import parse_url, redact

    assert redact(address) == shown
    if address.startswith("postgresql"):  # SQLAlchemy's URL sorts its parameters
        parsed = redact(parse_url(address))
        assert "s3cr3t" not in parsed and parsed.startswith(shown.split("?")[0].replace("://", "+psycopg://"))
        assert sorted(parsed.split("?")[1].split("&")) == sorted(shown.split("?")[1].split("&"))


def test_a_libpq_keyword_string_is_refused_not_taken_for_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    good = write_results(tmp_path / "good.json", make_session())
    for keywords in ("host=127.0.0.1 dbname=perf user=perf password=kw-s3cret", "dbname = perf password=kw-s3cret"):
        code, out, err = run("history", "ingest", "--history", keywords, str(good))
        assert code == EXIT_USAGE, err
        assert "--history: history store (a keyword string): key=value settings are not a store address: " in err
        assert "kw-s3cret" not in out + err
    code, _, err = run("history", "ingest", "--history", "postgresql:/perf@db/perf?password=kw-s3cret", str(good))
    assert code == EXIT_USAGE and "not a database address: write postgresql://" in err
    assert "kw-s3cret" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.json"]  # no file named after the settings


@pytest.mark.parametrize(
    ("address", "secret", "rule"),
    [
        ("postgresql://perf:Pa@ss9Secret@127.0.0.1:55432/perf", "ss9Secret", "one '@' only, the one before the host"),
        ("postgresql://perf:p@ss/9Secret@db/perf", "9Secret", "one '@' only, the one before the host"),
        ("postgresql://pe@rf:9Secret@db/perf", "9Secret", "one '@' only, the one before the host"),
        ("postgresql://perf:x9Secret@[::1:55432/perf", "x9Secret", "an IPv6 host is written whole in brackets"),
        ("postgresql://perf:x9Secret@db:5o32/perf", "x9Secret", "the port after the host's ':' is a whole number"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("through", ["option", "environment"])
def test_an_address_that_reads_more_than_one_way_is_a_usage_error_naming_the_rule_and_no_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, address: str, secret: str, rule: str, through: str
) -> None:
    monkeypatch.chdir(tmp_path)
    good = write_results(tmp_path / "good.json", make_session())
    for command in (["ingest", str(good)], ["changes"], ["dashboard", "--out", "site"]):
        if through == "option":
            code, out, err = run("history", *command, "--history", address)
        else:
            monkeypatch.setenv("GPUPERF_HISTORY", address)
            code, out, err = run("history", *command)
        assert code == EXIT_USAGE, out + err
        setting = "--history" if through == "option" else "GPUPERF_HISTORY"
        assert f"error: {setting}: history store postgresql://" in err and f"malformed address: {rule}" in err
        assert secret not in out + err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.json"]


@pytest.mark.parametrize("command", [["changes"], ["dashboard", "--out", "site"]])
@pytest.mark.parametrize("through", ["option", "environment"])
def test_reading_a_store_that_does_not_exist_is_refused_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], through: str
) -> None:
    monkeypatch.chdir(tmp_path)
    typo = tmp_path / "typo" / "perf-histroy.db"
    if through == "option":
        argv = ["history", *command, "--history", str(typo)]
    else:
        monkeypatch.setenv("GPUPERF_HISTORY", f"sqlite:///{typo}")
        argv = ["history", *command]
    code, out, err = run(*argv)
    assert code == EXIT_INVALID_INPUT, out + err
    assert f"history store sqlite:///{typo}: no store there: only recording (--gpuperf-history) and " in err
    assert not (tmp_path / "typo").exists() and not (tmp_path / "site").exists()
    good = write_results(tmp_path / "good.json", make_session())
    assert run("history", "ingest", "--history", str(typo), str(good))[0] == EXIT_OK  # ingest creates it
    assert run(*argv)[0] == EXIT_OK


def _edited(tmp_path: Path, name: str, edit: Any) -> Path:
    doc = json.loads(write_results(tmp_path / f"{name}.src.json", make_session()).read_text())
    edit(doc)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def test_ingest_refuses_each_bad_file_by_name_and_stores_the_others(tmp_path: Path, store_url: str) -> None:
    good = write_results(tmp_path / "good.json", make_session())
    bad_time = _edited(tmp_path, "bad-time", lambda d: d.update(started_at="9999-99-99"))
    bad_date = _edited(tmp_path, "bad-date", lambda d: d["provenance"].update(commit_date="not a date"))
    twice = _edited(tmp_path, "twice", lambda d: d["results"].append(d["results"][0]))
    later = write_results(
        tmp_path / "later.json", dataclasses.replace(make_session(), started_at="2026-03-01T00:00:00Z")
    )
    code, out, err = run("history", "ingest", "--history", store_url, str(bad_time), str(good), str(bad_date),
                         str(twice), str(later))  # fmt: skip
    assert code == EXIT_INVALID_INPUT
    assert f"stored {good}" in out and f"stored {later}" in out and "2 stored, 0 already stored, 3 refused" in out
    assert f"refused results file {bad_time} at $.started_at: started_at '9999-99-99' is not an ISO 8601 time" in err
    assert (f"refused results file {bad_date} at $.provenance.commit_date: commit_date 'not a date' is not an "
            "ISO 8601 time") in err  # fmt: skip
    first = make_session().results[0].measurement
    assert (f"refused results file {twice}: measurement {first.test_id}::{first.name} appears more than once") in err
    assert "Traceback" not in err and "UNIQUE" not in err
    with open_store(store_url) as store:
        assert store.count_runs() == 2


@pytest.mark.parametrize("where", ["metric", "extra_info"])
def test_a_session_with_a_nan_or_infinite_value_is_recorded_without_it(store_url: str, where: str) -> None:
    """Recording never fails on a non-finite value: a NaN metric is not stored, a NaN in the run's JSON is null."""
    from pytest_gpuperf.history.record import StoreAddress, record_session
    from pytest_gpuperf.history.store import SeriesFilter
    from pytest_gpuperf.model import BenchmarkInfo

    session = make_session()
    at = next(i for i, r in enumerate(session.results) if r.measurement.metrics)
    first = session.results[at]
    m = first.measurement
    if where == "metric":
        changed = dataclasses.replace(m, metrics=tuple(dataclasses.replace(x, value=float("nan")) for x in m.metrics))
    else:
        info = BenchmarkInfo("b", "t::b", extra_info={"acc": float("nan"), "rate": float("inf"), "ok": 1.5})
        changed = dataclasses.replace(m, benchmark=info)
    results = list(session.results)
    results[at] = dataclasses.replace(first, measurement=changed)
    session = dataclasses.replace(session, results=tuple(results))
    line = record_session(StoreAddress(store_url, "--gpuperf-history"), session)
    assert line.startswith("gpuperf: recorded run ")
    with open_store(store_url) as store:
        assert store.count_runs() == 1
        stored = {
            s.key.statistic for s in store.load_series(SeriesFilter(test=m.test_id)) if s.key.measurement == m.name
        }
    assert "time.p50" in stored
    if where == "metric":
        assert not any(s.startswith("metric.") for s in stored)  # refused per value, the rest kept
