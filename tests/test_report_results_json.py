from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest
from test_report_helpers import make_session

from pytest_gpuperf.errors import GpuperfError
from pytest_gpuperf.model import (
    BenchmarkInfo,
    DeviceState,
    DeviceSummary,
    EnergySource,
    Measurement,
    Note,
    NoteKind,
    SessionResults,
)
from pytest_gpuperf.report.results_json import (
    SCHEMA_VERSION,
    ResultsError,
    load_results,
    results_schema,
    write_results,
)


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    session = make_session()
    path = write_results(tmp_path / "out" / "results.json", session)
    assert path.is_file()
    assert load_results(path) == session


def test_document_holds_statistics_samples_verdicts_and_context(tmp_path: Path) -> None:
    session = make_session()
    path = write_results(tmp_path / "r.json", session)
    doc = json.loads(path.read_text())
    assert doc["format"] == "pytest-gpuperf-results"
    assert doc["summary"] == {
        "improvement": 1,
        "new": 1,
        "not comparable": 1,
        "not gated": 1,
        "not resolved": 1,
        "regression": 1,
        "unchanged": 1,
        "unstable": 1,
    }
    by_key = {r["key"]: r for r in doc["results"]}
    reg = by_key["tests/perf/test_matmul.py::test_matmul[fp16-4096]::default"]
    assert reg["verdict"] == "regression"
    assert reg["measurement"]["samples_ns"][0] == pytest.approx(session.results[3].measurement.samples_ns[0])
    assert reg["measurement"]["stats"]["median_ns"] == pytest.approx(1_250_000.0)
    assert reg["comparisons"][0]["evidence"].startswith("CI of ratio")
    assert reg["baseline"]["provenance"]["commit"] == "b" * 40
    assert reg["measurement"]["profile"]["top_ops"][0] == ["aten::mm", 1_100_000.0, 0.88]
    assert doc["environment"]["device_class"] == "nvidia-h100-80gb-hbm3"
    assert doc["provenance"]["commit"] == "a" * 40
    assert path.read_text().endswith("}\n")


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(results_schema())


def _write_doc(tmp_path: Path, mutate: object) -> Path:
    path = write_results(tmp_path / "r.json", make_session())
    doc = json.loads(path.read_text())
    mutate(doc)  # type: ignore[operator]
    path.write_text(json.dumps(doc))
    return path


def test_load_names_file_and_json_path_of_a_bad_field(tmp_path: Path) -> None:
    def corrupt(doc: dict) -> None:  # type: ignore[type-arg]
        doc["results"][2]["measurement"]["samples_ns"][1] = "fast"

    path = _write_doc(tmp_path, corrupt)
    with pytest.raises(ResultsError) as info:
        load_results(path)
    err = info.value
    assert isinstance(err, GpuperfError)
    assert err.path == path
    assert err.json_path == "$.results[2].measurement.samples_ns[1]"
    assert str(path) in str(err)
    assert "'fast' is not of type 'number'" in str(err)


def test_load_rejects_unknown_verdict_and_missing_fields(tmp_path: Path) -> None:
    path = _write_doc(tmp_path, lambda d: d["results"][0]["comparisons"].append({"key": "x"}))
    with pytest.raises(ResultsError, match=r"results\[0\]\.comparisons\[0\]"):
        load_results(path)


def test_load_rejects_non_json_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ResultsError, match=r"bad\.json: not JSON"):
        load_results(bad)
    with pytest.raises(ResultsError, match="cannot read"):
        load_results(tmp_path / "missing.json")


def test_write_refuses_nan_naming_the_field(tmp_path: Path) -> None:
    session = make_session()
    first = session.results[0]
    broken_measurement: Measurement = dataclasses.replace(first.measurement, wall_time_s=float("nan"))
    broken = dataclasses.replace(
        session, results=(dataclasses.replace(first, measurement=broken_measurement), *session.results[1:])
    )
    target = tmp_path / "r.json"
    with pytest.raises(ResultsError) as info:
        write_results(target, broken)
    assert info.value.json_path == "$.results[0].measurement.wall_time_s"
    assert not target.exists()


def test_write_validates_before_writing(tmp_path: Path) -> None:
    session = make_session()
    empty_mode: SessionResults = dataclasses.replace(session, mode="")
    target = tmp_path / "r.json"
    with pytest.raises(ResultsError, match=r"\$\.mode"):
        write_results(target, empty_mode)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_write_reports_writes_each_requested_file(tmp_path: Path) -> None:
    from pytest_gpuperf.report import write_reports

    session = make_session()
    reports = write_reports(
        session,
        {
            "json": tmp_path / "r" / "results.json",
            "markdown": tmp_path / "r" / "comment.md",
            "benchmark-json": tmp_path / "r" / "bench.json",
            "html": tmp_path / "r" / "report.html",
        },
    )
    paths = reports.written
    assert reports.failed == []
    assert [p.name for p in paths] == ["results.json", "comment.md", "bench.json", "report.html"]
    assert load_results(paths[0]) == session
    assert paths[1].read_text().startswith("<!-- pytest-gpuperf-comment -->")
    assert json.loads(paths[2].read_text())["benchmarks"]
    assert "<table" in paths[3].read_text()
    nothing = write_reports(session, {})
    assert (nothing.written, nothing.failed) == ([], [])


def test_a_version_1_file_is_read_with_kinds_from_the_comparison_names(tmp_path: Path) -> None:
    doc = json.loads(write_results(tmp_path / "r.json", make_session()).read_text())
    doc["schema_version"] = 1
    for result in doc["results"]:
        for c in result["comparisons"]:
            del c["kind"], c["explanation"]
        result["comparisons"] = [c for c in result["comparisons"] if c["verdict"] != "not gated"]
    doc["results"] = [r for r in doc["results"] if r["verdict"] != "not gated"]
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(doc))
    loaded = load_results(old)
    kinds = {c.metric.split(".")[0]: c.kind.value for r in loaded.results for c in r.comparisons}
    assert kinds == {"time": "time", "memory": "memory", "metric": "metric"}


def test_a_version_3_file_reads_bare_notes_as_notices_and_no_benchmark_names(tmp_path: Path) -> None:
    session = make_session()
    doc = json.loads(write_results(tmp_path / "r.json", session).read_text())
    assert doc["schema_version"] == SCHEMA_VERSION
    doc["schema_version"] = 3
    del doc["repro_args"]
    for result in doc["results"]:
        result["measurement"]["notes"] = [n["text"] for n in result["measurement"]["notes"]]
        del result["measurement"]["benchmark"]
    old = tmp_path / "v3.json"
    old.write_text(json.dumps(doc))
    loaded = load_results(old)
    assert [r.measurement.notes for r in loaded.results] == [
        tuple(Note(n.text) for n in r.measurement.notes) for r in session.results
    ]
    assert any(r.measurement.notes for r in loaded.results)
    assert all(r.measurement.benchmark is None for r in loaded.results)


def test_notes_and_the_benchmark_fixtures_names_round_trip(tmp_path: Path) -> None:
    first = make_session().results[0]
    measured = dataclasses.replace(
        first.measurement,
        notes=(Note("rounds pinned to CPU 3", NoteKind.ROUTINE), Note("re-measured in a fresh process")),
        benchmark=BenchmarkInfo("test_x[3]", "t.py::test_x[3]", "g", "3", {"n": 3}, {"rows": [1, 2], "dtype": "f32"}),
    )
    session = dataclasses.replace(make_session(), results=(dataclasses.replace(first, measurement=measured),))
    assert load_results(write_results(tmp_path / "r.json", session)) == session


def test_a_notes_topic_round_trips_and_a_version_4_file_reads_without_one(tmp_path: Path) -> None:
    session = make_session()
    first = session.results[0]
    topical = dataclasses.replace(first.measurement, notes=(Note("written busy", topic="written-busy"),))
    session = dataclasses.replace(session, results=(dataclasses.replace(first, measurement=topical),))
    path = write_results(tmp_path / "r.json", session)
    assert load_results(path).results[0].measurement.notes == (Note("written busy", topic="written-busy"),)
    doc = json.loads(path.read_text())
    doc["schema_version"] = 4
    for note in doc["results"][0]["measurement"]["notes"]:
        del note["topic"]
    (tmp_path / "v4.json").write_text(json.dumps(doc))
    assert load_results(tmp_path / "v4.json").results[0].measurement.notes == (Note("written busy"),)


def test_repro_args_round_trip_and_a_version_5_file_reads_without_them(tmp_path: Path) -> None:
    session = dataclasses.replace(make_session(), repro_args=("-p", "no:randomly", "--gpuperf-threshold=0.05"))
    path = write_results(tmp_path / "r.json", session)
    assert load_results(path) == session
    doc = json.loads(path.read_text())
    doc["schema_version"] = 5
    del doc["repro_args"]
    (tmp_path / "v5.json").write_text(json.dumps(doc))
    assert load_results(tmp_path / "v5.json") == dataclasses.replace(session, repro_args=())
    doc["schema_version"] = 6  # a version 6 file must have them
    (tmp_path / "v6.json").write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match="'repro_args' is a required property"):
        load_results(tmp_path / "v6.json")


def test_the_device_state_round_trips_with_the_baseline_entrys_summary(tmp_path: Path) -> None:
    session = make_session()
    first = session.results[1]
    assert first.baseline is not None
    n = len(first.measurement.samples_ns)
    state = DeviceState(sm_clock_mhz=(1980.0,) * n, power_w=(650.5,) * n, reasons=(4,) * n, readings=2,
                        reading_ns=42_000.0, summary=DeviceSummary(sm_clock_mhz=1980.0, power_w=650.5),
                        energy_source=EnergySource.COUNTER)  # fmt: skip
    measurement = dataclasses.replace(first.measurement, device_state=state)
    baseline = dataclasses.replace(first.baseline, device_state=DeviceSummary(sm_clock_mhz=1755.0))
    results = (session.results[0], dataclasses.replace(first, measurement=measurement, baseline=baseline),
               *session.results[2:])  # fmt: skip
    session = dataclasses.replace(session, results=results)
    path = write_results(tmp_path / "r.json", session)
    assert load_results(path) == session
    assert json.loads(path.read_text())["results"][1]["measurement"]["device_state"]["energy_source"] == "counter"
