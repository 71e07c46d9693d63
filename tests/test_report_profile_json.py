"""The differential profile in the results JSON: schema-validated, round-tripped, older files still read."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest
from test_report_profile_helpers import (
    JITTER,
    cpu_extra_op_diff,
    cuda_host_side_diff,
    cuda_kernel_swap_diff,
    no_base_diff,
    regressed,
    session_of,
)

from pytest_gpuperf.errors import ResultsError
from pytest_gpuperf.model import SessionResults
from pytest_gpuperf.report.results_json import load_results, results_schema, write_results


def _profiled_session() -> SessionResults:
    """Every kind of diff, and the compact profiles a measurement and a baseline entry carry."""
    diffs = [cpu_extra_op_diff(), cuda_kernel_swap_diff(), cuda_host_side_diff(), no_base_diff()]
    results = []
    for i, diff in enumerate(diffs):
        result = regressed(diff, f"tests/perf/test_{i}.py::test_x")
        assert result.baseline is not None
        results.append(dataclasses.replace(
            result,
            measurement=dataclasses.replace(result.measurement, op_profile=diff.head),
            baseline=dataclasses.replace(result.baseline, profile=diff.base),
        ))  # fmt: skip
    return session_of(*results, regressed(None, "tests/perf/test_plain.py::test_x"))


def test_profile_diffs_round_trip(tmp_path: Path) -> None:
    session = _profiled_session()
    assert load_results(write_results(tmp_path / "r.json", session)) == session


def test_the_document_carries_each_rows_status_and_change_for_readers(tmp_path: Path) -> None:
    doc = json.loads(write_results(tmp_path / "r.json", _profiled_session()).read_text())
    jsonschema.Draft202012Validator(results_schema()).validate(doc)
    cpu = doc["results"][0]["profile_diff"]
    assert cpu["base_label"] == "baseline 1f3c9e2"
    assert cpu["changes"][0] == {
        "name": "aten::gelu", "kind": "operator", "base": None, "on_device": False, "absent_below_ns": 0.0,
        "status": "appeared",
        "delta_ns": 412_000.0,
        "head": {"name": "aten::gelu", "kind": "operator", "calls": 1, "host_ns": 412_000.0, "device_ns": 0.0,
                 "host_samples_ns": [pytest.approx(412_000.0 * j) for j in JITTER], "device_samples_ns": []},
    }  # fmt: skip
    assert [(r["name"], r["reading"], r["role"]) for r in cpu["rows"][:3]] == [
        ("aten::gelu", "appeared", "cause"), ("aten::copy_", "calls", "cause"), ("[rest]", "rest", "rest"),
    ]  # fmt: skip
    gelu = cpu["rows"][0]
    assert gelu["low_ns"] < gelu["delta_ns"] == 412_000.0 < gelu["high_ns"] and gelu["exact"]
    assert cpu["finding"] == "explained" and cpu["basis"] == "host"
    assert cpu["host_delta_ns"] == pytest.approx(412_000.0 * 1.05 + 6_500.0 * 1.05)
    assert cpu["device_delta_ns"] is None
    host = doc["results"][2]["profile_diff"]
    assert host["host_delta_ns"] == 41_000.0 and host["changes"] == []
    assert doc["results"][3]["profile_diff"]["base"] is None
    assert doc["results"][4]["profile_diff"] is None
    assert doc["results"][1]["measurement"]["op_profile"]["device_type"] == "cuda"
    assert doc["results"][1]["baseline"]["profile"]["ops"][0]["name"] == "aten::mm"


@pytest.mark.parametrize(
    ("where", "value", "json_path", "message"),
    [
        (("profile_diff", "changes", 0, "kind"), "thread", "profile_diff.changes[0].kind",
         "'thread' is not one of ['operator', 'kernel', 'function']"),
        (("profile_diff", "head", "ops", 1, "calls"), -1, "profile_diff.head.ops[1].calls",
         "-1 is less than the minimum of 0"),
        (("profile_diff", "head", "profiled_calls"), 0, "profile_diff.head.profiled_calls",
         "0 is less than the minimum of 1"),
        (("measurement", "op_profile", "host_ns"), "fast", "measurement.op_profile.host_ns",
         "'fast' is not of type 'number'"),
    ],
)  # fmt: skip
def test_a_bad_profile_field_is_named_with_its_json_path(
    tmp_path: Path, where: tuple[str | int, ...], value: object, json_path: str, message: str
) -> None:
    path = write_results(tmp_path / "r.json", _profiled_session())
    doc = json.loads(path.read_text())
    node = doc["results"][0]
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsError) as info:
        load_results(path)
    assert info.value.json_path == f"$.results[0].{json_path}"
    assert message in str(info.value)


def test_a_version_2_file_without_profiles_still_loads(tmp_path: Path) -> None:
    session = session_of(regressed(None), regressed(None, "tests/perf/test_other.py::test_y"))
    doc = json.loads(write_results(tmp_path / "r.json", session).read_text())
    doc["schema_version"] = 2
    for result in doc["results"]:
        del result["profile_diff"], result["measurement"]["op_profile"], result["baseline"]["profile"]
    old = tmp_path / "v2.json"
    old.write_text(json.dumps(doc))
    assert load_results(old) == session


def test_the_current_version_requires_the_profile_fields(tmp_path: Path) -> None:
    path = write_results(tmp_path / "r.json", session_of(regressed(None)))
    doc = json.loads(path.read_text())
    del doc["results"][0]["profile_diff"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match="'profile_diff' is a required property"):
        load_results(path)


def test_a_version_4_file_reads_its_diffs_without_explanation_rows(tmp_path: Path) -> None:
    doc = json.loads(write_results(tmp_path / "r.json", _profiled_session()).read_text())
    doc["schema_version"] = 4
    for result in doc["results"]:
        diff = result["profile_diff"]
        profiles = [result["measurement"].get("op_profile"), *((diff["head"], diff["base"]) if diff else ())]
        for owner in [p for p in profiles if p] + [s for p in profiles if p for s in p["ops"]]:
            owner.pop("host_samples_ns", None)
            owner.pop("device_samples_ns", None)
        if diff:
            for field in ("rows", "measured", "profile_change", "finding", "basis"):
                del diff[field]
    old = tmp_path / "v4.json"
    old.write_text(json.dumps(doc))
    loaded = load_results(old)
    diff = loaded.results[0].profile_diff
    assert diff is not None and diff.rows == () and diff.finding is None and diff.changes
