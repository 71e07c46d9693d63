"""Results files and the baselines' git history as runs; ingest into both kinds of store."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import pytest
from test_report_helpers import make_session
from test_report_history import history_repo  # noqa: F401  (a git repository of baseline versions)
from test_report_profile_helpers import cpu_extra_op_diff, regressed, session_of

from pytest_gpuperf.errors import ResultsError
from pytest_gpuperf.history.ingest import (
    ingest_files,
    legacy_run_identity,
    load_run,
    measurement_values,
    run_from_session,
    run_identity,
    runner_name,
    runs_from_baselines,
)
from pytest_gpuperf.history.store import SeriesFilter, open_store
from pytest_gpuperf.model import DeviceState, DeviceSummary
from pytest_gpuperf.report.results_json import write_results


def _by_key(values: tuple[object, ...]) -> dict[tuple[str, str, str], object]:
    return {(v.test, v.measurement, v.statistic): v for v in values}  # type: ignore[attr-defined]


def test_a_results_file_becomes_a_run_with_every_statistic(tmp_path: Path) -> None:
    session = make_session()
    run = load_run(write_results(tmp_path / "r.json", session), runner="gpu-07")
    assert (run.commit, run.branch, run.mode, run.source, run.runner) == (
        session.provenance.commit, session.provenance.branch, session.mode, "results-file", "gpu-07",
    )  # fmt: skip
    assert run.device_class == session.environment.device_class
    assert run.commit_date == session.provenance.commit_date and run.started_at == session.started_at
    assert {"torch", "cuda", "driver", "gpu_model", "gpu_count", "device_name"} <= set(run.environment)
    values = _by_key(run.values)
    m = next(r.measurement for r in session.results if "test_matmul[fp16-4096]" in r.measurement.test_id)
    key = (m.test_id, m.name)
    p50 = values[(*key, "time.p50")]
    assert p50.value == pytest.approx(statistics.median(m.samples_ns))  # type: ignore[attr-defined]
    assert p50.ci_low < p50.value < p50.ci_high  # type: ignore[attr-defined]
    assert p50.p10 < p50.value < p50.p90 and p50.samples == len(m.samples_ns)  # type: ignore[attr-defined]
    assert p50.verdict == "regression"  # type: ignore[attr-defined]
    for stat in ("mean", "min", "p90", "p99"):
        assert values[(*key, f"time.{stat}")].value == pytest.approx(m.stats.get(stat))  # type: ignore[attr-defined]
    memory = values[(*key, "memory.peak_allocated")]
    assert (memory.value, memory.unit, memory.verdict) == (3 * 2**30, "bytes", "regression")  # type: ignore[attr-defined]
    metrics = [v for v in run.values if v.statistic.startswith("metric.")]
    assert metrics, "the fixture session has metrics"
    for v in metrics:
        source = next(r.measurement.metric(v.statistic.removeprefix("metric.")) for r in session.results
                      if r.measurement.test_id == v.test and r.measurement.name == v.measurement)  # fmt: skip
        assert source is not None and (v.value, v.unit, v.better) == (source.value, source.unit, source.better)


def test_a_gpus_state_while_it_measured_is_kept_beside_its_time(tmp_path: Path, store_url: str) -> None:
    session = make_session()
    first = session.results[1]
    summary = DeviceSummary(sm_clock_mhz=1755.0, mem_clock_mhz=None, power_w=612.5, temperature_c=61.0)
    measured = dataclasses.replace(first.measurement, device_state=DeviceState(summary=summary))
    results = (session.results[0], dataclasses.replace(first, measurement=measured), *session.results[2:])
    session = dataclasses.replace(session, results=results)
    run = load_run(write_results(tmp_path / "r.json", session))
    device = {v.statistic: (v.value, v.unit, v.better) for v in run.values
              if v.test == measured.test_id and v.statistic.startswith("device.")}  # fmt: skip
    assert device == {"device.sm_clock": (1755.0, "MHz", "higher"), "device.power": (612.5, "W", "lower"),
                      "device.temperature": (61.0, "°C", "lower")}  # fmt: skip
    assert not [v for v in run.values if v.test != measured.test_id and v.statistic.startswith("device.")]
    with open_store(store_url) as store:
        store.record(run)
        [series] = store.load_series(SeriesFilter(statistic="device.sm_clock"))
    assert (series.unit, series.better, series.points[0].value) == ("MHz", "higher", 1755.0)


def test_the_profile_diff_of_a_confirmed_regression_is_kept_on_the_judged_statistic() -> None:
    diff = cpu_extra_op_diff()
    run = run_from_session(session_of(regressed(diff, "t.py::test_x"), regressed(None, "t.py::test_y")))
    with_diff = [v for v in run.values if v.profile_diff is not None]
    assert [(v.test, v.statistic) for v in with_diff] == [("t.py::test_x", "time.p50")]
    assert with_diff[0].profile_diff["base_label"] == diff.base_label  # type: ignore[index]


def test_the_identity_is_the_content(tmp_path: Path) -> None:
    session = make_session()
    path = write_results(tmp_path / "r.json", session)
    assert load_run(path).run_id == load_run(path).run_id == run_from_session(session).run_id
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(json.loads(path.read_text())))  # another layout of the same content
    assert load_run(copy).run_id == run_identity(session)
    later = dataclasses.replace(session, started_at="2026-01-02T04:00:00+00:00")
    assert run_identity(later) != run_identity(session)


@pytest.mark.parametrize("version", [1, 2])
def test_older_format_versions_are_ingested(tmp_path: Path, version: int) -> None:
    doc = json.loads(write_results(tmp_path / "r.json", make_session()).read_text())
    doc["schema_version"] = version
    for result in doc["results"]:
        del result["profile_diff"]
        result["measurement"].pop("op_profile", None)
        if isinstance(result.get("baseline"), dict):
            result["baseline"].pop("profile", None)
        if version == 1:
            for c in result["comparisons"]:
                del c["kind"], c["explanation"]
            result["comparisons"] = [c for c in result["comparisons"] if c["verdict"] != "not gated"]
    if version == 1:
        doc["results"] = [r for r in doc["results"] if r["verdict"] != "not gated"]
    old = tmp_path / f"v{version}.json"
    old.write_text(json.dumps(doc))
    run = load_run(old)
    assert run.values and run.commit == doc["provenance"]["commit"]
    assert load_run(old).run_id == run.run_id
    if version == 2:  # the same session in another format version is the same run (version 1 drops results)
        assert run.run_id == load_run(tmp_path / "r.json").run_id


def test_the_identity_does_not_change_with_the_results_format(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpuperf.report import codec

    session = make_session()
    before, legacy = run_identity(session), legacy_run_identity(session)
    to_json = codec.to_json

    def next_format(value: object) -> object:  # a later format version: a new field in every results file
        document = to_json(value)
        return {**document, "format_addition": 1} if isinstance(document, dict) else document

    monkeypatch.setattr(codec, "to_json", next_format)
    assert run_identity(session) == before
    assert legacy_run_identity(session) != legacy  # what the id was before: the file's bytes


def test_a_run_stored_under_its_earlier_id_is_not_stored_again(tmp_path: Path, store_url: str) -> None:
    session = make_session()
    path = write_results(tmp_path / "r.json", session)
    run = load_run(path)
    assert run.earlier_ids == (legacy_run_identity(session),) and run.run_id not in run.earlier_ids
    with open_store(store_url) as store:  # a store written before run ids came from the content
        assert store.record(dataclasses.replace(run, run_id=legacy_run_identity(session), earlier_ids=()))
        assert ingest_files(store, [path]).already == (path,)
        assert store.count_runs() == 1


def test_corrupt_and_unknown_version_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": "pytest-gpuperf-results", "schema_version": 3, "results": [')
    with pytest.raises(ResultsError, match=r"corrupt\.json: not JSON"):
        load_run(corrupt)
    doc = json.loads(write_results(tmp_path / "r.json", make_session()).read_text())
    doc["schema_version"] = 99
    future = tmp_path / "future.json"
    future.write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match=r"future\.json at \$\.schema_version: format version 99 is newer"):
        load_run(future)
    with pytest.raises(ResultsError, match=r"missing\.json: cannot read"):
        load_run(tmp_path / "missing.json")


def test_a_bad_file_among_good_ones_is_refused_whole_and_the_good_ones_are_stored(
    tmp_path: Path, store_url: str
) -> None:
    good = write_results(tmp_path / "good.json", make_session())
    later = dataclasses.replace(make_session(), started_at="2026-01-03T00:00:00")
    other = write_results(tmp_path / "other.json", later)
    doc = json.loads(good.read_text())
    doc["results"][1]["measurement"]["calls_per_sample"] = 0  # valid JSON, invalid file: fails late in its results
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**doc, "started_at": "2026-01-04T00:00:00"}))
    with open_store(store_url) as store:
        outcome = ingest_files(store, [good, bad, other])
        assert outcome.stored == (good, other) and outcome.already == ()
        [(path, reason)] = outcome.refused
        assert path == bad and "bad.json at $.results[1].measurement.calls_per_sample" in reason
        assert store.count_runs() == 2  # nothing of bad.json
        again = ingest_files(store, [good, other])
        assert again.stored == () and again.already == (good, other)
        assert store.count_runs() == 2


def test_the_baselines_git_history_becomes_update_runs(
    history_repo: tuple[Path, list[str]],  # noqa: F811
    store_url: str,
) -> None:
    root, shas = history_repo
    runs = runs_from_baselines(root)
    assert [r.commit for r in runs] == shas  # one run per commit that wrote entries (one device class)
    assert all(r.baseline_update and r.source == "baselines-git" and r.mode == "update" for r in runs)
    assert [sorted({v.test for v in r.values}) for r in runs][:2] == [
        ["tests/test_a.py::test_a", "tests/test_b.py::test_b"],
        ["tests/test_a.py::test_a", "tests/test_b.py::test_b"],
    ]
    assert runs_from_baselines(root)[0].run_id == runs[0].run_id
    assert all(len(r.earlier_ids) == 1 and r.run_id not in r.earlier_ids for r in runs)
    with open_store(store_url) as store:
        assert sum(store.record(r) for r in runs) == len(runs)
        assert sum(store.record(r) for r in runs_from_baselines(root)) == 0
        [series] = store.load_series(SeriesFilter(test="test_a", statistic="time.p50"))
    assert [p.commit for p in series.points] == shas[:4]
    assert series.points[2].value == pytest.approx(1_500_000.0, rel=0.05)
    assert all(p.baseline_update for p in series.points)
    assert all(p.p10 is not None and p.p10 <= p.value <= p.p90 for p in series.points)  # type: ignore[operator]


def test_the_runner_is_named_by_the_environment_else_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    assert runner_name({"GPUPERF_RUNNER": "h100-rack-3"}) == "h100-rack-3"
    assert runner_name({}) == socket.gethostname()


def test_baseline_versions_stored_under_their_earlier_ids_are_not_stored_again(
    history_repo: tuple[Path, list[str]],  # noqa: F811
    store_url: str,
) -> None:
    root, _ = history_repo
    runs = runs_from_baselines(root)
    with open_store(store_url) as store:  # a store written before run ids came from the content
        for r in runs:
            assert store.record(dataclasses.replace(r, run_id=r.earlier_ids[0], earlier_ids=()))
        assert sum(store.record(r) for r in runs_from_baselines(root)) == 0
        assert store.count_runs() == len(runs)


REFUSED_TEST = "tests/t.py::test_refused_by_the_database"
TRIGGERS = {  # a database that refuses one run itself: each backend's own way
    "sqlite": ("CREATE TRIGGER gpuperf_test_refuse BEFORE INSERT ON gpuperf_values "
               f"WHEN NEW.test = '{REFUSED_TEST}' BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END",),
    "postgresql": ("CREATE FUNCTION gpuperf_test_refuse() RETURNS trigger AS $$ BEGIN "
                   f"IF NEW.test = '{REFUSED_TEST}' THEN RAISE EXCEPTION 'refused by a trigger'; END IF; "
                   "RETURN NEW; END $$ LANGUAGE plpgsql",
                   "CREATE TRIGGER gpuperf_test_refuse BEFORE INSERT ON gpuperf_values FOR EACH ROW "
                   "EXECUTE FUNCTION gpuperf_test_refuse()"),
}  # fmt: skip


def _sessions(tmp_path: Path, count: int) -> list[Path]:
    """``count`` results files of distinct runs (each started a day after the one before)."""
    return [
        write_results(tmp_path / f"r{i}.json", dataclasses.replace(make_session(), started_at=f"2026-02-{i + 1:02d}"))
        for i in range(count)
    ]


def _rename_test(path: Path, test_id: str) -> None:
    doc = json.loads(path.read_text())
    measurement = doc["results"][0]["measurement"]
    doc["results"][0]["key"] = f"{test_id}::{measurement['name']}"
    measurement["test_id"] = test_id
    path.write_text(json.dumps(doc))


def test_every_file_is_tried_when_the_database_refuses_one_and_each_is_reported_by_name(
    tmp_path: Path, store_url: str
) -> None:
    from cli_helpers import run

    files = _sessions(tmp_path, 7)
    _rename_test(files[2], REFUSED_TEST)
    with open_store(store_url) as store, store.engine.begin() as conn:
        for statement in TRIGGERS[conn.dialect.name]:
            conn.exec_driver_sql(statement)
    code, out, err = run("history", "ingest", "--history", store_url, *map(str, files))
    assert code == 3, out + err
    assert [line for line in out.splitlines() if line.startswith("stored ")] == [
        f"stored {path}" for path in files if path != files[2]
    ]
    assert f"refused results file {files[2]}: not stored: history store " in err and "refused by a trigger" in err
    assert "6 stored, 0 already stored, 1 refused" in out
    with open_store(store_url) as store:
        assert store.count_runs() == 6


@pytest.mark.parametrize(
    ("where", "bad", "reason"),
    [
        (("measurement", "test_id"), "tests/t.py::test_\x00nul", "its test holds a NUL character"),
        (("measurement", "metrics", 0, "unit"), "m\x00s", "its unit holds a NUL character"),
        (("measurement", "metrics", 0, "name"), "m" * 222,
         "its statistic is 229 characters long; a history store keeps at most 200"),
        (("measurement", "metrics", 0, "unit"), "u" * 65,
         "its unit is 65 characters long; a history store keeps at most 64"),
        (("measurement", "environment", "extra", "runner"), "gpu\x0007", "holds a NUL character"),
    ],
)  # fmt: skip
def test_text_one_backend_cannot_store_is_refused_on_every_backend_naming_the_file(
    tmp_path: Path, store_url: str, where: tuple[str | int, ...], bad: str, reason: str
) -> None:
    """SQLite would store a NUL or an over-long unit, PostgreSQL not: both refuse the run and hold the same runs."""
    good, other, broken = _sessions(tmp_path, 3)
    doc = json.loads(broken.read_text())
    node = next(r for r in doc["results"] if r["measurement"]["metrics"])
    if where[-1] == "test_id":
        node["key"] = f"{bad}::{node['measurement']['name']}"
    elif where[1] == "environment":
        node, where = doc, ("environment", "extra", "runner")
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = bad
    broken.write_text(json.dumps(doc))
    with open_store(store_url) as store:
        outcome = ingest_files(store, [good, broken, other])
        assert outcome.stored == (good, other)
        [(path, message)] = outcome.refused
        assert path == broken and message.startswith(f"results file {broken}") and reason in message
        assert "\x00" not in message  # shown escaped
        assert store.count_runs() == 2


def test_a_measurement_with_scheduler_accounting_records_its_time_less_the_wait() -> None:
    from pytest_gpuperf.model import MeasurementResult, Scheduling, WaitSource
    from tests.verdict_helpers import measurement

    n = 300
    waits = (1000.0,) * n
    scheduling = Scheduling(WaitSource.SCHEDSTAT, waits, (0.0,) * n, waits, (0.0,) * n, waits, cpus=2)
    busy = {"cpu_pressure": 0.6, "cpu_steal": 0.0, "cpu_runnable": 5, "cpus": 2}
    m = measurement(2000.0, scheduling=scheduling, health=busy)
    values = {v.statistic: v for v in measurement_values(MeasurementResult(m))}
    assert values["time.p50"].busy is not None  # the wall clock's median was taken busy
    less = values["time.p50_less_wait"]
    assert less.value == pytest.approx(1000.0, rel=0.02) and less.busy is None  # the wait taken out: not busy
    assert values["contention.wait_share"].value == pytest.approx(0.5, abs=0.02)
    quiet = {v.statistic for v in measurement_values(MeasurementResult(measurement(1000.0)))}
    assert "time.p50_less_wait" not in quiet  # no accounting recorded (an older file): nothing to take out
