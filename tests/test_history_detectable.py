"""What each run could resolve, kept in the history (``gpuperf_values.detectable``, migration 0003) and shown on
the dashboard's points, so that a test's minimum detectable change can be followed over time."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from test_report_helpers import make_session

from pytest_gpuperf.history.dashboard.svg import point_title
from pytest_gpuperf.history.ingest import run_from_session
from pytest_gpuperf.history.store import SeriesFilter, known_revisions, open_store
from pytest_gpuperf.model import Detectable, MeasurementResult, SessionResults

FOUND = Detectable(change=0.0123, threshold=0.02, power=0.8, readings=16, reading="round pairs", needed=16)


def _with_detectable(session: SessionResults) -> SessionResults:
    results = []
    for r in session.results:
        comparisons = tuple(dataclasses.replace(c, detectable=FOUND) if c.metric == "time.p50" else c
                            for c in r.comparisons)  # fmt: skip
        results.append(MeasurementResult(r.measurement, comparisons, r.baseline, r.outcome, r.profile_diff))
    return dataclasses.replace(session, results=tuple(results))


def test_the_judged_statistic_keeps_its_detectable_change_and_the_dashboard_shows_it(store_url: str) -> None:
    session = _with_detectable(make_session())
    run = run_from_session(session, runner="r1")
    judged = [v for v in run.values if v.statistic == "time.p50" and v.verdict is not None]
    assert judged and all(v.detectable == FOUND.change for v in judged)
    assert all(v.detectable is None for v in run.values if v.statistic != "time.p50")
    # what a run could resolve is no part of its identity: a session recorded before it was known is the same run
    assert run.run_id == run_from_session(make_session(), runner="r1").run_id
    with open_store(store_url) as store:
        assert store.schema_revision() == known_revisions()[-1] == "0003"
        store.record(run)
        series = store.load_series(SeriesFilter(statistic="time.p50"))
    shown = [(s, p) for s in series for p in s.points if p.detectable is not None]
    assert shown and all(p.detectable == FOUND.change for _, p in shown)
    from pytest_gpuperf.history.dashboard.axes import ValueScale

    s, p = shown[0]
    assert "resolves 1.2% (minimum detectable change)" in point_title(p, s, ValueScale.of([p.value], s.unit))


def test_a_store_of_the_previous_schema_is_upgraded_and_its_values_resolve_nothing_known(tmp_path: Path) -> None:
    import sqlalchemy
    from alembic import command
    from alembic.config import Config

    from pytest_gpuperf.history.store import _script_directory

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        config = Config()
        config.set_main_option("script_location", _script_directory().dir)
        config.attributes["connection"] = conn
        command.upgrade(config, "0002")
        conn.execute(sqlalchemy.text(
            "INSERT INTO gpuperf_runs VALUES ('r', 'c', 'main', '2026-01-01T00:00:00+00:00', NULL, 'm', 'cpu-x', "
            "'baseline', 'session', 0, '{}', '2026-01-01T00:00:00+00:00')"))  # fmt: skip
        conn.execute(sqlalchemy.text(
            "INSERT INTO gpuperf_values (run_id, test, measurement, statistic, value, unit, better) "
            "VALUES ('r', 't', 'default', 'time.p50', 1.0, 'ns', 'lower')"))  # fmt: skip
    engine.dispose()
    with open_store(str(tmp_path / "old.db")) as store:
        assert store.schema_revision() == "0003"
        [s] = store.load_series()
    assert s.points[0].detectable is None
