"""The history store: recorded runs in SQLite or PostgreSQL, read back as series.

One schema for both databases (``schema.py``, SQLAlchemy Core), versioned by Alembic
migrations shipped in the package (``migrations/``) and applied when a store is opened:
an older store is upgraded, one written by a newer pytest-gpuperf is refused.

Writing a run is one transaction, the run and all its values or nothing, and
``INSERT ... ON CONFLICT DO NOTHING`` on the run's content-derived id: the same run stored
twice, or by several processes at once, is stored once.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.errors import StoreError
from pytest_gpuperf.history import schema
from pytest_gpuperf.history.model import Point, RecordedValue, RunRecord, Series, SeriesKey, parse_time
from pytest_gpuperf.history.url import MASK, create_engine, parse_url, redact, secrets
from pytest_gpuperf.model import Direction, Verdict
from pytest_gpuperf.model.busy import load_moves

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory
    from sqlalchemy import Table
    from sqlalchemy.engine import Connection, Engine, RowMapping
    from sqlalchemy.sql.dml import Insert

NO_BRANCH = "(no branch)"  # the series' branch for runs on a detached HEAD or outside git
_MIGRATION_LOCK = 0x67707066  # PostgreSQL advisory lock held while one process migrates ("gppf")


def open_store(url: str, *, create: bool = True, setting: str | None = None) -> HistoryStore:
    """Connect to ``url`` (see ``url.py``), migrate it to this version's schema, and return the store.

    Raises StoreError, with the password hidden, when the store cannot be reached, is not a
    database, or was written by a newer version; with ``create=False`` (reading only), when
    a SQLite store does not exist. An address that is not one is a StoreAddressError naming
    ``setting``, where the address came from.
    """
    parsed = parse_url(url, setting=setting)
    store = HistoryStore(create_engine(parsed, create=create), redact(parsed), secrets(parsed))
    try:
        store.migrate()
    except BaseException:
        store.close()
        raise
    return store


@dataclass(frozen=True)
class SeriesFilter:
    """Which series to read: each field narrows the selection; None takes all."""

    test: str | None = None  # a substring of the test's node id
    device_class: str | None = None
    branch: str | None = None
    statistic: str | None = None  # exact ("time.p50") or a prefix ending in "." ("memory.")


class HistoryStore:
    """A connection to one store. Use :func:`open_store`; close it (or use ``with``) when done."""

    def __init__(self, engine: Engine, url: str, secrets: tuple[str, ...] = ()) -> None:
        self.engine = engine
        self.url = url  # redacted: safe to print
        self._secrets = secrets  # scrubbed from the database's own error messages

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.dispose()

    # -- errors -------------------------------------------------------------------------

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Database errors as StoreError naming the store (password hidden) and what failed."""
        from sqlalchemy.exc import SQLAlchemyError

        driver_error = getattr(self.engine.dialect.loaded_dbapi, "Error", SQLAlchemyError)
        try:
            yield
        except (SQLAlchemyError, driver_error) as exc:  # the driver's own: one SQLAlchemy did not wrap
            raise StoreError(self.url, f"{doing}: {self._reason(exc)}") from None

    def _reason(self, exc: Exception) -> str:
        original = getattr(exc, "orig", None) or exc
        text = " ".join(str(original).split()) or type(original).__name__
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text.split(" [SQL:")[0].split(" (Background on this error")[0]

    # -- schema -------------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the store to this version's schema; refuse one newer than this version knows."""
        script = _script_directory()
        head = script.get_current_head()
        with self._errors("cannot open"):
            with self.engine.connect() as conn:
                current = _current_revision(conn)
            if current == head:
                return
            with self.engine.connect().execution_options(gpuperf_write=True) as conn, conn.begin():
                if conn.dialect.name == "postgresql":  # one migrating process at a time
                    from sqlalchemy import func, select

                    conn.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
                current = _current_revision(conn)  # again, under the lock
                if current is not None and current not in {rev.revision for rev in script.walk_revisions()}:
                    raise StoreError(
                        self.url,
                        f"its schema (revision {current}) was written by a newer pytest-gpuperf; this one knows "
                        f"revisions up to {head}: upgrade pytest-gpuperf to use this store",
                    )
                if current != head:
                    _upgrade(conn)

    def schema_revision(self) -> str | None:
        with self._errors("cannot read the schema version"), self.engine.connect() as conn:
            return _current_revision(conn)

    # -- writing ------------------------------------------------------------------------

    def record(self, run: RunRecord) -> bool:
        """Store ``run`` and its values in one transaction; False when it was already stored."""
        run_row = _run_row(run)
        value_rows = [_value_row(run.run_id, v) for v in run.values if math.isfinite(v.value)]
        writer = self.engine.connect().execution_options(gpuperf_write=True)
        with self._errors(f"cannot store run {run.run_id[:12]}"), writer as conn, conn.begin():
            if run.earlier_ids and _stored_under(conn, run.earlier_ids):
                return False  # kept by an earlier version, under the id it gave the run
            insert = _insert_ignoring_duplicates(conn, schema.runs).values(**run_row)
            if conn.execute(insert.returning(schema.runs.c.run_id)).first() is None:
                return False  # stored before, by this or another process: its values are there too
            if value_rows:
                conn.execute(schema.values.insert(), value_rows)
        return True

    # -- reading ------------------------------------------------------------------------

    def count_runs(self) -> int:
        from sqlalchemy import func, select

        with self._errors("cannot count runs"), self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(schema.runs)).scalar_one())

    def load_series(self, where: SeriesFilter | None = None) -> list[Series]:
        """Every series matching ``where``, each in commit order (commit date, then run time).

        Two reads grouped here, not a query per series: the runs (few, in their order), then
        every selected value in one fetch, without a join or a sort in the database (the
        points are put in their runs' order here). Runs without a commit are stored but left
        out: a change point is named by commits.
        """
        from sqlalchemy import func, select

        where = where or SeriesFilter()
        r, v = schema.runs, schema.values
        run_query = select(
            r.c.run_id, r.c.commit, r.c.started_at, r.c.runner, r.c.baseline_update, r.c.commit_date,
            r.c.device_class, r.c.branch,
        ).where(r.c.commit.is_not(None))  # fmt: skip
        if where.device_class:
            run_query = run_query.where(r.c.device_class == where.device_class)
        if where.branch:
            branch = r.c.branch.is_(None) if where.branch == NO_BRANCH else r.c.branch == where.branch
            run_query = run_query.where(branch)
        run_query = run_query.order_by(func.coalesce(r.c.commit_date, r.c.started_at), r.c.started_at, r.c.run_id)
        value_query = select(
            v.c.run_id, v.c.test, v.c.measurement, v.c.statistic, v.c.unit, v.c.better, v.c.value, v.c.ci_low,
            v.c.ci_high, v.c.p10, v.c.p90, v.c.samples, v.c.verdict, v.c.busy, v.c.detectable,
            v.c.profile_diff.is_not(None).label("has_profile_diff"),
        )  # fmt: skip
        if where.test:
            value_query = value_query.where(v.c.test.contains(where.test, autoescape=True))
        if where.statistic:
            stat = where.statistic
            value_query = value_query.where(
                v.c.statistic.startswith(stat, autoescape=True) if stat.endswith(".") else v.c.statistic == stat
            )
        if where.device_class or where.branch:
            value_query = value_query.where(v.c.run_id.in_(run_query.with_only_columns(r.c.run_id).order_by(None)))
        with self._errors("cannot read series"), self.engine.connect() as conn, conn.begin():
            run_rows = conn.execute(run_query).all()
            value_rows = conn.execute(value_query).all()  # one fetch: far faster than a row at a time
        runs = {row.run_id: (rank, row) for rank, row in enumerate(run_rows)}
        grouped: dict[SeriesKey, tuple[str, Direction, list[tuple[int, Point]]]] = {}
        for row in value_rows:
            found = runs.get(row.run_id)
            if found is None:
                continue  # a run without a commit
            rank, run = found
            key = SeriesKey(row.test, row.measurement, row.statistic, run.device_class, run.branch or NO_BRANCH)
            entry = grouped.get(key)
            if entry is None:
                entry = grouped[key] = (row.unit, _direction(row.better, key, self.url), [])
            entry[2].append((rank, _point(run._mapping, row._mapping)))
        series = []
        for k, (unit, better, ranked) in grouped.items():
            ranked.sort(key=_first)
            series.append(Series(k, unit, better, tuple(p for _, p in ranked)))
        series.sort(key=lambda s: (s.key.test, s.key.measurement, s.key.statistic, s.key.device_class, s.key.branch))
        return series

    def load_profile_diff(self, run_id: str, test: str, measurement: str) -> Mapping[str, object] | None:
        """The differential profile recorded with a confirmed regression of this run's measurement, if any.

        The results-file JSON of ``MeasurementResult.profile_diff`` (``report.why`` renders it).
        """
        from sqlalchemy import select

        v = schema.values
        query = (
            select(v.c.profile_diff)
            .where(v.c.run_id == run_id, v.c.test == test, v.c.measurement == measurement)
            .where(v.c.profile_diff.is_not(None))
            .order_by(v.c.statistic)
            .limit(1)
        )
        with self._errors("cannot read a profile diff"), self.engine.connect() as conn:
            found = conn.execute(query).scalar_one_or_none()
        return found if isinstance(found, Mapping) else None

    def load_profile_diffs(self, series: Sequence[Series]) -> dict[tuple[str, str, str], Mapping[str, object]]:
        """Every profile diff recorded for the points of ``series``, by (run id, test, measurement).

        One query over the (few) values that carry a diff, for the dashboard's links.
        """
        from sqlalchemy import select

        wanted = {(p.run_id, s.key.test, s.key.measurement) for s in series for p in s.points if p.has_profile_diff}
        if not wanted:
            return {}
        v = schema.values
        query = select(v.c.run_id, v.c.test, v.c.measurement, v.c.profile_diff).where(v.c.profile_diff.is_not(None))
        found: dict[tuple[str, str, str], Mapping[str, object]] = {}
        with self._errors("cannot read profile diffs"), self.engine.connect() as conn:
            for run_id, test, measurement, diff in conn.execute(query):
                if (run_id, test, measurement) in wanted and isinstance(diff, Mapping):
                    found.setdefault((run_id, test, measurement), diff)
        return found

    def commit_date_of(self, commit: str) -> str | None:
        """The commit date the store has for ``commit`` (a full hash or a unique prefix), else None."""
        from sqlalchemy import func, select

        r = schema.runs
        query = select(func.min(func.coalesce(r.c.commit_date, r.c.started_at))).where(
            r.c.commit.startswith(commit, autoescape=True)
        )
        with self._errors("cannot look a commit up"), self.engine.connect() as conn:
            found = conn.execute(query).scalar_one_or_none()
        return str(found) if found is not None else None


def _first(pair: tuple[int, Point]) -> int:
    return pair[0]


def _point(run: RowMapping, value: RowMapping) -> Point:
    """A series' point from a run's row and one of its value rows (columns read by name)."""
    verdict = value["verdict"]
    return Point(
        run_id=run["run_id"],
        commit=run["commit"],
        started_at=run["started_at"],
        runner=run["runner"],
        value=value["value"],
        ci_low=value["ci_low"],
        ci_high=value["ci_high"],
        p10=value["p10"],
        p90=value["p90"],
        samples=value["samples"],
        verdict=Verdict(verdict) if verdict is not None else None,
        baseline_update=bool(run["baseline_update"]),
        has_profile_diff=bool(value["has_profile_diff"]),
        commit_date=run["commit_date"],
        # the run was busy; whether that moved this value is the busy rule's (peak memory is exact)
        busy=value["busy"] if load_moves(value["statistic"], value["unit"]) else None,
        detectable=value["detectable"],
    )


def _direction(text: str, key: SeriesKey, url: str) -> Direction:
    """A stored ``better`` as the model's direction; StoreError naming the series for anything else."""
    if text not in ("lower", "higher"):
        raise StoreError(url, f"{key.label}: better must be 'lower' or 'higher', got {text!r}")
    return "lower" if text == "lower" else "higher"


def utc_timestamp(text: str | None) -> str | None:
    """An ISO 8601 time as UTC ISO text (naive times are taken as UTC), so times sort as text."""
    if text is None:
        return None
    moment = parse_time(text)
    if moment is None:
        raise ValueError(f"not an ISO 8601 time: {text!r}")
    return moment.isoformat()


def _run_row(run: RunRecord) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "commit": run.commit,
        "branch": run.branch,
        "started_at": utc_timestamp(run.started_at),
        "commit_date": utc_timestamp(run.commit_date),
        "runner": run.runner,
        "device_class": run.device_class,
        "mode": run.mode.value,
        "source": run.source,
        "baseline_update": run.baseline_update,
        "environment": dict(run.environment),
        "stored_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
    }


def _value_row(run_id: str, value: RecordedValue) -> dict[str, Any]:
    def finite(x: float | None) -> float | None:
        return x if x is not None and math.isfinite(x) else None

    return {
        "run_id": run_id,
        "test": value.test,
        "measurement": value.measurement,
        "statistic": value.statistic,
        "value": value.value,
        "unit": value.unit,
        "better": value.better,
        "ci_low": finite(value.ci_low),
        "ci_high": finite(value.ci_high),
        "p10": finite(value.p10),
        "p90": finite(value.p90),
        "samples": value.samples,
        "verdict": Verdict(value.verdict).value if value.verdict is not None else None,
        "profile_diff": dict(value.profile_diff) if value.profile_diff is not None else None,
        "busy": value.busy,
        "detectable": finite(value.detectable),
    }


def _stored_under(conn: Connection, run_ids: Sequence[str]) -> bool:
    from sqlalchemy import select

    r = schema.runs
    return conn.execute(select(r.c.run_id).where(r.c.run_id.in_(run_ids)).limit(1)).first() is not None


def _insert_ignoring_duplicates(conn: Connection, table: Table) -> Insert:
    """``INSERT ... ON CONFLICT (primary key) DO NOTHING``: both dialects have it, each its own construct."""
    from sqlalchemy.dialects import postgresql, sqlite

    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    return insert(table).on_conflict_do_nothing(index_elements=[c.name for c in table.primary_key])


def _script_directory() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(resources.files("pytest_gpuperf.history").joinpath("migrations")))


def _current_revision(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(conn, opts={"version_table": schema.VERSION_TABLE})
    revision: str | None = context.get_current_revision()
    return revision


def _upgrade(conn: Connection) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(resources.files("pytest_gpuperf.history").joinpath("migrations")))
    config.attributes["connection"] = conn
    command.upgrade(config, "head")


def known_revisions() -> Sequence[str]:
    """The schema revisions this version can read, oldest first."""
    return [rev.revision for rev in reversed(list(_script_directory().walk_revisions()))]
