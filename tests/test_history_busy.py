"""Busy runs known as such: marked in the store from the contention counters (or NVML throttling) each
measurement carries, drawn apart on the dashboard, and left out of change points."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from test_report_helpers import make_session

from pytest_gpuperf.history.dashboard import build_site
from pytest_gpuperf.history.detect import find_changes, too_short
from pytest_gpuperf.history.ingest import run_from_session
from pytest_gpuperf.history.model import Point, Series, SeriesKey
from pytest_gpuperf.history.store import SeriesFilter, known_revisions, open_store
from pytest_gpuperf.measure.host.cpu.contention import Contention
from pytest_gpuperf.model.busy import busy_evidence, contended

KEY = SeriesKey("t.py::test_flat", "default", "time.p50", "cpu-x", "main")
LOADED = {"cpu_pressure": 0.91, "cpu_steal": 0.0, "cpu_runnable": 7, "cpus": 2}
QUIET = {"cpu_pressure": 0.01, "cpu_steal": 0.0, "cpu_runnable": 1, "cpus": 2}


def test_busy_evidence_reads_the_counters_a_measurement_carries() -> None:
    assert busy_evidence(LOADED, None, "cpu") == "CPU pressure 91% of the time, steal 0.0%, 7 runnable tasks on 2 CPUs"
    assert busy_evidence(QUIET, None, "cpu") is None
    assert busy_evidence({}, None, "cpu") is None  # nothing recorded: unknown is not busy
    assert busy_evidence({"cpu_pressure": None, "cpu_steal": 0.08, "cpus": 4}, None, "cpu") is not None
    assert busy_evidence({}, "GPU clock throttled (thermal)", "cuda:0") == "GPU GPU clock throttled (thermal)"
    # one rule: the CPU guard's judgement is the same function
    for data in (LOADED, QUIET, {"cpu_pressure": None, "cpu_steal": 0.0, "cpu_runnable": 3, "cpus": 2}):
        c = Contention.from_data(data)
        assert c is not None
        assert (
            c.busy
            == contended(c.pressure, c.steal, c.runnable, c.cpus)
            == (busy_evidence(data, None, "cpu") is not None)
        )


def _session_with(health: dict[str, object], unstable: str | None = None):  # type: ignore[no-untyped-def]
    session = make_session()
    results = tuple(
        dataclasses.replace(
            r,
            measurement=dataclasses.replace(r.measurement, device="cpu", health=health, unstable_reason=unstable),
        )
        for r in session.results
    )
    return dataclasses.replace(session, results=results)


def test_a_busy_run_is_marked_in_the_store(store_url: str) -> None:
    busy = run_from_session(_session_with(LOADED), runner="r1")
    quiet = run_from_session(_session_with(QUIET), runner="r1")
    assert {v.busy for v in busy.values} == {"CPU pressure 91% of the time, steal 0.0%, 7 runnable tasks on 2 CPUs"}
    assert {v.busy for v in quiet.values} == {None}
    quiet = dataclasses.replace(quiet, commit="f" * 40, commit_date="2027-01-01T00:00:00+00:00")
    with open_store(store_url) as store:
        assert store.schema_revision() == known_revisions()[-1] == "0003"
        store.record(busy)
        store.record(quiet)
        series = store.load_series(SeriesFilter(statistic="time.p50"))
    assert series and all([p.busy is not None for p in s.points] == [True, False] for s in series)


def test_a_store_of_the_first_schema_is_upgraded_and_its_values_are_not_busy(tmp_path: Path) -> None:
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
        command.upgrade(config, "0001")
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
    assert s.points[0].busy is None


def _flat_with_busy_runs(seed: int, busy: bool = True) -> Series:
    """50 runs at 1% noise, one level; runs 20-24 and the newest eight measured under load, 20-35% slower."""
    rng = np.random.default_rng(seed)
    points = []
    for i in range(50):
        loaded = 20 <= i <= 24 or i >= 42
        value = 1e6 * float(np.exp(rng.normal(0, 0.01))) * (1 + rng.uniform(0.2, 0.35) if loaded else 1.0)
        evidence = "CPU pressure 90% of the time" if loaded and busy else None
        points.append(Point(f"r{i}", f"{i:040x}", "", "m", value, value * 0.998, value * 1.002, busy=evidence))
    return Series(KEY, "ns", "lower", tuple(points))


@pytest.mark.parametrize("seed", range(10))
def test_a_flat_series_with_busy_runs_among_quiet_ones_has_no_change_point(seed: int) -> None:
    assert find_changes(_flat_with_busy_runs(seed)) == []
    assert find_changes(_flat_with_busy_runs(seed, busy=False)) != []  # unmarked, the load reads as changes


def test_a_step_is_placed_by_the_quiet_runs_around_busy_ones() -> None:
    rng = np.random.default_rng(3)
    points = []
    for i in range(40):
        value = 1e6 * (1.35 if i >= 20 else 1.0) * float(np.exp(rng.normal(0, 0.01)))
        loaded = 12 <= i <= 16
        value *= 1.3 if loaded else 1.0
        busy = "CPU pressure 95% of the time" if loaded else None
        points.append(Point(f"r{i}", f"{i:040x}", "", "m", value, value * 0.998, value * 1.002, busy=busy))
    series = Series(KEY, "ns", "lower", tuple(points))
    [change] = find_changes(series)
    assert (change.first_bad, change.index, change.runs_after) == (f"{20:040x}", 20, 20)
    assert not too_short(series)
    # a runner busy all along: its runs are compared with each other (the step is there again,
    # and so is the heavier load of runs 12-16, which nothing quiet shows to be load)
    all_busy = dataclasses.replace(series, points=tuple(dataclasses.replace(p, busy="x") for p in points))
    assert not too_short(all_busy) and f"{20:040x}" in [c.first_bad for c in find_changes(all_busy)]


def test_busy_runs_are_drawn_apart_on_the_dashboard(tmp_path: Path) -> None:
    series = _flat_with_busy_runs(0)
    for p in series.points:  # the dashboard needs dated runs
        object.__setattr__(p, "started_at", "2026-05-01T00:00:00+00:00")
    build_site([series], [], tmp_path / "site")
    page = next((tmp_path / "site" / "series").glob("*.html")).read_text()
    busy = re.findall(r'<circle [^>]*class="busy"><title>([^<]*)</title>', page)
    assert len(busy) == 13 and all("busy runner: CPU pressure 90% of the time" in t for t in busy)
    median = re.search(r'<polyline class="median"[^>]*points="([^"]*)"', page)
    assert median is not None and len(median.group(1).split()) == 37  # through the quiet runs only


def _memory_run(i: int, health: dict[str, object]):  # type: ignore[no-untyped-def]
    """Run ``i`` of one measurement whose peak memory steps from 1 GiB to 1.5 GiB at run 15, its time flat."""
    session = _session_with(health)
    first = session.results[3]  # the measurement with peak memory
    peak = 2**30 * (1.5 if i >= 15 else 1.0)
    m = dataclasses.replace(first.measurement, peak_allocated_bytes=int(peak), peak_reserved_bytes=None)
    session = dataclasses.replace(session, results=(dataclasses.replace(first, measurement=m, comparisons=()),),
                                  started_at=f"2026-10-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00")  # fmt: skip
    run = run_from_session(session, runner="r1")
    return dataclasses.replace(run, commit=f"{i:040x}", commit_date=session.started_at)


def test_busy_runs_leave_out_timings_only_memory_is_exact(store_url: str, tmp_path: Path) -> None:
    """A memory step with busy runs after it: drawn on its line and placed where it happened, not a creep."""
    with open_store(store_url) as store:
        for i in range(30):
            store.record(_memory_run(i, LOADED if 10 <= i <= 25 else QUIET))
        [memory] = store.load_series(SeriesFilter(statistic="memory.peak_allocated"))
        [timing] = store.load_series(SeriesFilter(statistic="time.p50"))
    assert [p.busy is not None for p in timing.points] == [10 <= i <= 25 for i in range(30)]
    assert all(p.busy is None for p in memory.points)
    [step] = find_changes(memory)
    assert (step.first_bad, step.index, step.gradual) == (f"{15:040x}", 15, False)
    build_site([memory, timing], [step], tmp_path / "site")
    page = next((tmp_path / "site" / "series").glob("*.html")).read_text()
    charts = {re.search(r"<title>([^<]*)</title>", svg).group(1): svg  # type: ignore[union-attr]
              for svg in re.findall(r'<svg class="chart".*?</svg>', page, flags=re.S)}  # fmt: skip
    [memory_chart] = [svg for title, svg in charts.items() if "memory.peak_allocated" in title]
    [time_chart] = [svg for title, svg in charts.items() if "time.p50" in title]
    assert 'class="busy"' not in memory_chart and "left out of change points" not in memory_chart
    assert len(re.findall(r'class="busy"><title>', time_chart)) == 16
