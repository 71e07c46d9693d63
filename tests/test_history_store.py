"""The history store on SQLite and on a real PostgreSQL server: schema, transactions, series, URLs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_gpuperf.errors import StoreError
from pytest_gpuperf.history.model import RecordedValue, RunRecord
from pytest_gpuperf.history.store import NO_BRANCH, SeriesFilter, known_revisions, open_store
from pytest_gpuperf.history.url import parse_url, redact
from pytest_gpuperf.model import Verdict

ROOT = Path(__file__).resolve().parents[1]


def value(test: str, statistic: str = "time.p50", number: float = 100.0, **extra: object) -> RecordedValue:
    return RecordedValue(test, "default", statistic, number, "ns", **extra)  # type: ignore[arg-type]


def run(run_id: str, commit: str, *, day: int, values: tuple[RecordedValue, ...] = (), **extra: object) -> RunRecord:
    fields: dict[str, object] = {
        "run_id": run_id,
        "commit": commit,
        "branch": "main",
        "started_at": f"2026-03-{day:02d}T12:00:00+00:00",
        "runner": "runner-1",
        "device_class": "cpu-test",
        "mode": "baseline",
        "environment": {"torch": "2.13.0"},
        "values": values or (value("t.py::test_a"), value("t.py::test_a", "memory.peak_allocated", 1e6)),
        "commit_date": f"2026-03-{day:02d}T10:00:00+00:00",
    }
    fields.update(extra)
    return RunRecord(**fields)  # type: ignore[arg-type]


def test_a_run_is_stored_once(store_url: str) -> None:
    with open_store(store_url) as store:
        assert store.schema_revision() == known_revisions()[-1]
        assert store.record(run("r1", "c" * 40, day=1)) is True
        assert store.record(run("r1", "c" * 40, day=1)) is False
        assert store.count_runs() == 1
        [series_p50] = store.load_series(SeriesFilter(statistic="time.p50"))
        assert len(series_p50.points) == 1


def test_a_run_and_all_its_values_or_nothing(store_url: str) -> None:
    # the second value cannot be written (no unit: the column is NOT NULL): the run's insert is undone too
    broken = (value("t.py::test_a"), RecordedValue("t.py::test_b", "default", "time.p50", 1.0, None))  # type: ignore[arg-type]
    with open_store(store_url) as store:
        with pytest.raises(StoreError, match="cannot store run r-bad"):
            store.record(run("r-bad", "d" * 40, day=2, values=broken))
        assert store.count_runs() == 0
        assert store.load_series() == []
        assert store.record(run("r-bad", "d" * 40, day=2)) is True  # nothing half-written stands in the way


def test_a_run_refuses_what_the_store_could_not_keep() -> None:
    from pytest_gpuperf.errors import RunError

    with pytest.raises(RunError, match=r"measurement t\.py::test_a::default appears more than once"):
        run("r", "d" * 40, day=2, values=(value("t.py::test_a"), value("t.py::test_a")))
    for field, text in (("started_at", "9999-99-99"), ("commit_date", "not a date"),
                        ("commit_date", "9999-12-31T23:00:00-05:00")):  # fmt: skip
        with pytest.raises(RunError, match=f"{field} '{text}' is not an ISO 8601 time"):
            run("r", "d" * 40, day=2, **{field: text})


def test_series_are_grouped_by_key_and_ordered_by_commit_date_then_run_time(store_url: str) -> None:
    with open_store(store_url) as store:
        # stored out of order; a commit date in another time zone sorts by its UTC time
        store.record(run("r3", "3" * 40, day=3, values=(value("t.py::test_a", number=300),)))
        store.record(run("r1", "1" * 40, day=1, values=(value("t.py::test_a", number=100),)))
        store.record(run("r2b", "2" * 40, day=2, values=(value("t.py::test_a", number=201),),
                         started_at="2026-03-02T13:00:00+00:00"))  # fmt: skip
        store.record(run("r2a", "2" * 40, day=2, values=(value("t.py::test_a", number=200),),
                         commit_date="2026-03-02T11:00:00+01:00"))  # fmt: skip
        store.record(run("gpu", "2" * 40, day=2, device_class="cuda-h100", values=(value("t.py::test_a"),)))
        store.record(run("nobranch", "4" * 40, day=4, branch=None, values=(value("t.py::test_b"),)))
        store.record(run("nocommit", None, day=5, values=(value("t.py::test_a"),)))  # type: ignore[arg-type]
        everything = store.load_series()
        keys = [(s.key.test, s.key.device_class, s.key.branch) for s in everything]
        assert keys == [("t.py::test_a", "cpu-test", "main"), ("t.py::test_a", "cuda-h100", "main"),
                        ("t.py::test_b", "cpu-test", NO_BRANCH)]  # fmt: skip
        cpu = everything[0]
        assert [p.run_id for p in cpu.points] == ["r1", "r2a", "r2b", "r3"]  # "nocommit" is left out
        assert [p.value for p in cpu.points] == [100, 200, 201, 300]
        assert cpu.points[1].commit_date == "2026-03-02T10:00:00+00:00"
        assert (cpu.unit, cpu.better) == ("ns", "lower")
        only = store.load_series(SeriesFilter(test="test_a", device_class="cpu-test", branch="main"))
        assert [s.key for s in only] == [cpu.key]
        assert [s.key.test for s in store.load_series(SeriesFilter(branch=NO_BRANCH))] == ["t.py::test_b"]
        assert store.load_series(SeriesFilter(test="test_%")) == []  # a substring, not a LIKE pattern
        assert store.commit_date_of("2" * 8) == "2026-03-02T10:00:00+00:00"
        assert store.commit_date_of("f" * 8) is None


def test_statistic_filter_takes_a_family_by_prefix(store_url: str) -> None:
    with open_store(store_url) as store:
        store.record(run("r1", "1" * 40, day=1))
        assert [s.key.statistic for s in store.load_series(SeriesFilter(statistic="memory."))] == [
            "memory.peak_allocated"
        ]
        assert [s.key.statistic for s in store.load_series(SeriesFilter(statistic="time.p50"))] == ["time.p50"]


def test_points_carry_interval_spread_verdict_update_and_the_profile_diff(store_url: str) -> None:
    diff = {"base_label": "baseline abc", "changes": [{"name": "aten::mm", "delta_ns": 5.0}], "base": None}
    rich = value("t.py::test_a", ci_low=95.0, ci_high=105.0, p10=90.0, p90=110.0, samples=40,
                 verdict=Verdict.REGRESSION, profile_diff=diff)  # fmt: skip
    with open_store(store_url) as store:
        store.record(run("r1", "1" * 40, day=1, values=(rich,), baseline_update=True, mode="update"))
        [series] = store.load_series()
        [point] = series.points
        assert (point.ci_low, point.ci_high, point.p10, point.p90, point.samples) == (95.0, 105.0, 90.0, 110.0, 40)
        assert (point.verdict, point.baseline_update, point.has_profile_diff) == (Verdict.REGRESSION, True, True)
        assert point.verdict is Verdict.REGRESSION and series.better == "lower"  # typed as the model's, not text
        assert store.load_profile_diff("r1", "t.py::test_a", "default") == diff
        assert store.load_profile_diff("r1", "t.py::test_a", "other") is None
        assert store.load_profile_diffs([series]) == {("r1", "t.py::test_a", "default"): diff}


def test_a_store_from_a_newer_version_is_refused_and_an_empty_one_is_created(store_url: str) -> None:
    import sqlalchemy

    with open_store(store_url) as store:
        store.record(run("r1", "1" * 40, day=1))
        engine = store.engine
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("UPDATE gpuperf_alembic_version SET version_num = '9999_future'"))
    with pytest.raises(StoreError, match=r"revision 9999_future\) was written by a newer pytest-gpuperf"):
        open_store(store_url)


def test_an_older_store_is_upgraded_when_opened(store_url: str) -> None:
    """A store at an older revision (here: the empty one before the first) is migrated in place."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(parse_url(store_url))
    with engine.begin() as conn:  # a table of the user's own, which the migration must leave alone
        conn.execute(sqlalchemy.text("CREATE TABLE unrelated (x INTEGER)"))
    engine.dispose()
    with open_store(store_url) as store:
        assert store.schema_revision() == known_revisions()[-1]
        assert store.record(run("r1", "1" * 40, day=1))


# -- several processes at once ------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys, time
    from pytest_gpuperf.history.model import RecordedValue, RunRecord
    from pytest_gpuperf.history.store import open_store

    url, me, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    def run(run_id):
        values = tuple(RecordedValue(f"t.py::test_{i}", "default", "time.p50", float(i), "ns") for i in range(50))
        return RunRecord(run_id, run_id.ljust(40, "0")[:40], "main", "2026-03-01T00:00:00+00:00", me, "cpu-test",
                         "baseline", {}, values, commit_date="2026-03-01T00:00:00+00:00")
    while time.time() < start:  # all writers begin together
        time.sleep(0.005)
    with open_store(url) as store:
        new = sum(store.record(run(r)) for r in ["shared1", "shared2", "shared3", f"own{me}"])
    print(new)
    """
)


def test_concurrent_writers_from_several_processes_lose_nothing_and_store_each_run_once(store_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.time() + 3.0  # time to import before the race
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, store_url, str(i), str(start)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [err for _, err in outputs]
    assert sum(int(out) for out, _ in outputs) == 3 + 6  # each shared run stored by exactly one writer
    with open_store(store_url) as store:
        assert store.count_runs() == 9
        series = store.load_series()
        assert len(series) == 50
        assert all(len(s.points) == 9 for s in series)


# -- addresses ----------------------------------------------------------------------------------


def test_addresses(tmp_path: Path) -> None:
    assert parse_url(str(tmp_path / "h.db")).render_as_string() == f"sqlite:///{tmp_path / 'h.db'}"
    assert parse_url("relative.db").database == str(Path("relative.db").absolute())
    assert parse_url(f"sqlite:///{tmp_path}/x.db").database == f"{tmp_path}/x.db"
    for scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        assert parse_url(f"{scheme}://u:pw@db.example:5432/perf").drivername == "postgresql+psycopg"
    with pytest.raises(StoreError, match="unsupported database 'mysql'"):
        parse_url("mysql://u:secret@h/db")
    with pytest.raises(StoreError, match="needs a file"):
        parse_url("sqlite://")
    assert redact(parse_url("postgresql://u:s3cret@h/db")) == "postgresql+psycopg://u:***@h/db"
    assert redact("mysql://u:s3cret@h/db") == "mysql://u:***@h/db"


def test_an_unreachable_server_is_an_error_within_seconds_without_the_password() -> None:
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        open_store("postgresql://perf:s3cret-pw@127.0.0.1:1/perf")
    assert time.monotonic() - started < 30  # the connect timeout (5 s), not TCP's minutes
    assert "s3cret-pw" not in str(caught.value)
    assert "postgresql+psycopg://perf:***@127.0.0.1:1/perf" in str(caught.value)
    assert "cannot open" in str(caught.value)


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.db"
    bogus.write_text(json.dumps({"not": "a database"}) * 100)
    with pytest.raises(StoreError, match=r"notes\.db: cannot open: file is not a database"):
        open_store(str(bogus))
