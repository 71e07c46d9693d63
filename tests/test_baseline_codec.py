"""Baseline JSON: round trip, canonical bytes, schema errors that name the fault, migration."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_gpuperf.baseline import codec, migrate, schema
from pytest_gpuperf.baseline.codec import dump_document, entry_from_json, entry_to_json, load_document
from pytest_gpuperf.baseline.record import entry_from_measurement, thin_evenly
from pytest_gpuperf.errors import BaselineError, NonFiniteNumberError
from pytest_gpuperf.model import (
    BaselineEntry,
    DeviceState,
    DeviceSummary,
    Environment,
    Measurement,
    Metric,
    Provenance,
    Throughput,
)

MODULE = "tests/perf/test_mm.py"
KEY = f"{MODULE}::test_matmul[fp16-1024]::default"
PATH = Path("baselines/cuda-a100/tests__perf__test_mm.py.json")

ENV = Environment(
    device_class="cuda-a100",
    device_type="cuda",
    device_name="NVIDIA A100-SXM4-80GB",
    cpu_model="AMD EPYC 7742",
    python="3.11.7",
    torch="2.3.0",
    cuda="12.1",
    driver="535.104",
    gpu_uuid="GPU-1234",
    platform="Linux-x86_64",
    extra={"clocks": "locked"},
)


def make_measurement(test_id: str = KEY.rsplit("::", 1)[0], n: int = 500, name: str = "default") -> Measurement:
    samples = tuple(1000.0 + 7.123456789 * ((i * 37) % n) for i in range(n))
    return Measurement(
        test_id=test_id,
        name=name,
        samples_ns=samples,
        calls_per_sample=16,
        device="cuda:0",
        timer="cuda_event",
        round_medians_ns=tuple(2000.0 + i for i in range(150)),
        precision=0.01,
        calibration_ns=12345.678901,
        peak_allocated_bytes=123_456_789_012,
        peak_reserved_bytes=200_000_000_000,
        throughput=Throughput(items=32, flops=2.0 * 1024**3, bytes=None),
        metrics=(
            Metric("speedup", 1.2345678, unit="x", better="higher", tolerance=0.05, minimum=1.0),
            Metric("graph_breaks", 0, better="lower", tolerance=None, absolute_tolerance=0.0, description="breaks"),
        ),
    )


def make_entry(test_id: str = KEY.rsplit("::", 1)[0], name: str = "default", **changes: Any) -> BaselineEntry:
    entry = entry_from_measurement(
        make_measurement(test_id, name=name),
        ENV,
        Provenance(commit="a" * 40, branch="main", dirty=False, commit_date="2024-05-01T12:00:00+00:00"),
        noise=0.0123456789,
        recorded_at="2024-05-02T08:00:00+00:00",
    )
    return _replace(entry, **changes)


def _replace(entry: BaselineEntry, **changes: Any) -> BaselineEntry:
    from dataclasses import replace

    return replace(entry, **changes)


def document(*entries: BaselineEntry, module: str = MODULE) -> dict[str, Any]:
    return {
        "schema_version": migrate.CURRENT_VERSION,
        "device_class": "cuda-a100",
        "module": module,
        "entries": {e.key: entry_to_json(e) for e in entries},
    }


def rounded(entry: BaselineEntry) -> BaselineEntry:
    """What an entry looks like after one trip through a file."""
    return entry_from_json(entry_to_json(entry), path=PATH, key=entry.key)


# -- round trip and canonical form ----------------------------------------------


def test_round_trip_keeps_every_field() -> None:
    entry = make_entry()
    text = dump_document(document(entry))
    (loaded,) = load_document(text, PATH).values()
    assert loaded == rounded(entry)
    assert loaded.key == KEY
    assert loaded.environment == ENV
    assert loaded.provenance.branch == "main" and loaded.provenance.dirty is False
    assert loaded.metrics[0] == Metric("speedup", 1.23457, unit="x", better="higher", tolerance=0.05, minimum=1.0)
    assert loaded.metrics[1].absolute_tolerance == 0.0 and loaded.metrics[1].tolerance is None
    assert loaded.peak_allocated_bytes == 123_456_789_012  # ints are not rounded
    assert loaded.throughput == Throughput(items=32.0, flops=2147480000.0, bytes=None)  # 6 digits
    assert loaded.recorded_at == "2024-05-02T08:00:00+00:00"
    # a second trip changes nothing: rounding is idempotent
    assert load_document(dump_document(document(loaded)), PATH)[KEY] == loaded


def test_text_is_canonical() -> None:
    entry = make_entry()
    text = dump_document(document(entry))
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text == dump_document(json.loads(text)) == dump_document(document(entry))
    # 6 significant digits, ints stay ints
    data = json.loads(text)["entries"][KEY]
    assert data["noise"] == 0.0123457
    assert data["calibration_ns"] == 12345.7
    assert data["memory"]["peak_allocated_bytes"] == 123456789012
    assert data["calls_per_sample"] == 16 and isinstance(data["calls_per_sample"], int)
    assert '"noise": 0.0123457,' in text


def test_each_field_of_an_entry_is_one_line_in_sorted_order() -> None:
    """What a reviewer's diff shows of a refreshed entry: the fields that moved, a line each."""
    entry = make_entry()
    lines = dump_document(document(entry)).splitlines()
    fields = sorted(entry_to_json(entry))
    start = lines.index(f'    "{KEY}": {{')
    assert lines[start + 1 : start + 1 + len(fields)] == [
        f'      "{field}": {json.dumps(entry_to_json(entry)[field], sort_keys=True, separators=(", ", ": "))}'
        + ("," if i < len(fields) - 1 else "")
        for i, field in enumerate(fields)
    ]
    assert lines[start + 1 + len(fields)] == "    }"
    assert len(lines) == len(fields) + 9  # the document's braces, its four members, the entries' and the entry's


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1234567.891, 1234570.0), (-0.0, 0.0), (1e-12, 1e-12), (0.1 + 0.2, 0.3), (123456.0, 123456.0)],
)
def test_round_number(value: float, expected: float) -> None:
    assert codec.round_number(value) == expected
    assert codec.round_number(codec.round_number(value)) == codec.round_number(value)
    assert math.copysign(1.0, codec.round_number(value)) == math.copysign(1.0, expected)


def test_non_finite_values_are_refused_with_their_path() -> None:
    entry = make_entry(noise=math.inf)
    with pytest.raises(NonFiniteNumberError, match=r"entry\.noise is inf") as info:
        entry_to_json(entry)
    assert (info.value.parts, info.value.value) == (("noise",), math.inf)
    with pytest.raises(NonFiniteNumberError, match=r"entry\.samples_ns\[2\] is nan") as info:
        entry_to_json(make_entry(samples_ns=(1.0, 2.0, math.nan)))
    assert info.value.parts == ("samples_ns", 2)


# -- entries from measurements ----------------------------------------------------


def test_entry_from_measurement_thins_samples_but_keeps_full_stats() -> None:
    m = make_measurement()
    entry = make_entry()
    assert entry.key == m.key
    assert entry.stats == m.stats  # from all 500 samples
    assert len(entry.samples_ns) == 100
    assert entry.samples_ns[0] == min(m.samples_ns) and entry.samples_ns[-1] == max(m.samples_ns)
    assert list(entry.samples_ns) == sorted(entry.samples_ns)
    assert set(entry.samples_ns) <= set(m.samples_ns)
    assert entry.round_medians_ns[0] == 2000.0 and entry.round_medians_ns[-1] == 2149.0
    assert len(entry.round_medians_ns) == 100
    assert entry.metrics == m.metrics and entry.calibration_ns == m.calibration_ns
    assert entry.noise == 0.0123456789 and entry.environment == ENV


def test_an_entry_keeps_the_devices_state_as_its_medians_and_one_without_keeps_its_bytes() -> None:
    from dataclasses import replace

    summary = DeviceSummary(sm_clock_mhz=1755.0, mem_clock_mhz=2619.0, power_w=612.345678, temperature_c=None)
    m = replace(make_measurement(n=8), device_state=DeviceState(sm_clock_mhz=(1755.0,) * 8, summary=summary))
    entry = entry_from_measurement(m, ENV, Provenance(), noise=None, recorded_at=None)
    assert entry.device_state == summary
    data = entry_to_json(entry)
    assert data["device_state"] == {"sm_clock_mhz": 1755.0, "mem_clock_mhz": 2619.0, "power_w": 612.346,
                                    "temperature_c": None}  # fmt: skip
    assert rounded(entry).device_state == DeviceSummary(1755.0, 2619.0, 612.346, None)
    assert "device_state" not in entry_to_json(make_entry())  # a CPU's entry, or one written before it was kept


def test_entry_from_measurement_limits() -> None:
    m = make_measurement(n=7)
    few = entry_from_measurement(m, ENV, Provenance(), noise=None, recorded_at=None, max_samples=100)
    assert few.samples_ns == tuple(sorted(m.samples_ns))
    with pytest.raises(ValueError, match="at least 1"):
        entry_from_measurement(m, ENV, Provenance(), noise=None, recorded_at=None, max_samples=0)


@pytest.mark.parametrize(("n", "limit"), [(10, 3), (101, 100), (1000, 100), (5, 1), (3, 3), (250, 7)])
def test_thin_evenly_picks_distinct_evenly_spaced_positions(n: int, limit: int) -> None:
    values = [float(i) for i in range(n)]
    picked = thin_evenly(values, limit)
    assert len(picked) == min(n, limit)
    assert len(set(picked)) == len(picked)
    if limit > 1:
        assert picked[0] == 0 and picked[-1] == n - 1
        gaps = [b - a for a, b in itertools.pairwise(picked)]
        assert max(gaps) - min(gaps) <= 1


# -- bad input names the file and the place ---------------------------------------


def valid_text() -> str:
    return dump_document(document(make_entry()))


def error_of(content: str | bytes) -> BaselineError:
    with pytest.raises(BaselineError) as info:
        load_document(content, PATH)
    assert info.value.path == PATH
    assert str(PATH) in str(info.value)
    return info.value


def test_truncated_file() -> None:
    text = valid_text()
    err = error_of(text[: len(text) // 2])
    assert "not valid JSON" in str(err) and "line" in str(err)


@pytest.mark.parametrize("content", ["", "   \n", b""])
def test_empty_file(content: str | bytes) -> None:
    assert "empty" in str(error_of(content))


def test_binary_file() -> None:
    err = error_of(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    assert "not UTF-8" in str(err) and "byte 0" in str(err)


@pytest.mark.parametrize("content", ["NaN", '{"a": Infinity}', "1e400", "9" * 400])
def test_non_json_numbers(content: str) -> None:
    assert "not valid JSON" in str(error_of(content))


def test_deep_nesting() -> None:
    assert "not valid JSON" in str(error_of("[" * 100_000 + "]" * 100_000))


def test_not_an_object() -> None:
    err = error_of("[1, 2]")
    assert err.json_path == "$" and "an array" in str(err)


def test_missing_version() -> None:
    err = error_of('{"entries": {}}')
    assert err.json_path == "$" and "schema_version" in str(err)


@pytest.mark.parametrize("version", ['"2"', "true", "2.5"])
def test_version_of_wrong_type(version: str) -> None:
    err = error_of(f'{{"schema_version": {version}}}')
    assert err.json_path == "$.schema_version"


def test_newer_version() -> None:
    data = json.loads(valid_text())
    data["schema_version"] = migrate.CURRENT_VERSION + 1
    err = error_of(json.dumps(data))
    assert err.json_path == "$.schema_version"
    assert "written by a newer pytest-gpuperf" in str(err)


def test_version_zero() -> None:
    err = error_of('{"schema_version": 0}')
    assert err.json_path == "$.schema_version" and "unknown schema_version 0" in str(err)


def _mutated(edit: Any) -> str:
    data = json.loads(valid_text())
    edit(data, data["entries"][KEY])
    return json.dumps(data)


@pytest.mark.parametrize(
    ("edit", "json_path", "words"),
    [
        (lambda d, e: e["stats"].update(median_ns="fast"), f'$.entries["{KEY}"].stats.median_ns', "not of type"),
        (lambda d, e: e["stats"].pop("p99_ns"), f'$.entries["{KEY}"].stats', "'p99_ns' is a required"),
        (lambda d, e: e["stats"].update(min_ns=-1.0), f'$.entries["{KEY}"].stats.min_ns', "minimum"),
        (lambda d, e: e.update(samples_ns=[]), f'$.entries["{KEY}"].samples_ns', "should be non-empty"),
        (lambda d, e: e["samples_ns"].append(None), f'$.entries["{KEY}"].samples_ns[100]', "not of type"),
        (lambda d, e: e.update(calls_per_sample=0), f'$.entries["{KEY}"].calls_per_sample', "minimum"),
        (lambda d, e: e["metrics"][1].update(better="smaller"), f'$.entries["{KEY}"].metrics[1].better', "not one of"),
        (lambda d, e: e["environment"]["extra"].update(x=1), f'$.entries["{KEY}"].environment.extra.x', "not of type"),
        (lambda d, e: e["provenance"].update(dirty="yes"), f'$.entries["{KEY}"].provenance.dirty', "not of type"),
        (lambda d, e: e.update(surprise=1), f'$.entries["{KEY}"]', "'surprise' was unexpected"),
        (lambda d, e: d.update(entries=[]), "$.entries", "not of type 'object'"),
        (lambda d, e: d.update(module=""), "$.module", "should be non-empty"),
        (lambda d, e: d.pop("device_class"), "$", "'device_class' is a required"),
    ],
)
def test_wrong_shapes_and_types_name_the_json_path(edit: Any, json_path: str, words: str) -> None:
    err = error_of(_mutated(edit))
    assert err.json_path == json_path
    assert words in str(err)
    assert f"at {json_path}:" in str(err)


def test_entry_of_another_module() -> None:
    stranger = make_entry("tests/other/test_x.py::test_y")
    text = dump_document(document(make_entry(), stranger))
    err = error_of(text)
    assert err.json_path == f'$.entries["{stranger.key}"]'
    assert "does not belong to this file's module" in str(err)


@pytest.mark.parametrize("key", [MODULE, f"{MODULE}::", f"{MODULE}x::t::default"])
def test_malformed_keys(key: str) -> None:
    data = json.loads(valid_text())
    data["entries"][key] = data["entries"].pop(KEY)
    assert error_of(json.dumps(data)).json_path == schema.json_path(("entries", key))


def test_entry_from_json_reports_inside_the_entry() -> None:
    data = entry_to_json(make_entry())
    data["stats"]["count"] = 0
    with pytest.raises(BaselineError) as info:
        entry_from_json(data, path=PATH, key=KEY)
    assert info.value.json_path == f'$.entries["{KEY}"].stats.count'


def test_json_path_formatting() -> None:
    assert schema.json_path(()) == "$"
    assert schema.json_path(("entries", 'a"b', "stats", 0)) == '$.entries["a\\"b"].stats[0]'


def test_error_messages_are_bounded() -> None:
    err = error_of(_mutated(lambda d, e: d["entries"].update({KEY: ["x"] * 10_000})))
    assert len(str(err)) < 600


# -- migration ---------------------------------------------------------------------


def v1_document() -> dict[str, Any]:
    """A version-1 file as the first draft format wrote it."""
    return {
        "schema_version": 1,
        "device_class": "cuda-a100",
        "module": MODULE,
        "environment": {
            "device_class": "cuda-a100",
            "device_type": "cuda",
            "device_name": "NVIDIA A100-SXM4-80GB",
            "cpu_model": "AMD EPYC 7742",
            "python": "3.10.4",
            "torch": "2.1.0",
            "cuda": "11.8",
            "driver": None,
            "gpu_uuid": None,
            "platform": None,
            "extra": {},
        },
        "entries": {
            KEY: {
                "stats": {
                    "count": 6,
                    "mean_ns": 2000.0,
                    "median_ns": 2000.0,
                    "p90_ns": 2750.0,
                    "p99_ns": 2975.0,
                    "min_ns": 1000.0,
                    "max_ns": 3000.0,
                    "iqr_ns": 750.0,
                    "stdev_ns": 707.107,
                },
                "samples": [1000.0, 1500.0, 2000.0, 2000.0, 2500.0, 3000.0],
                "calls_per_sample": 4,
                "device": "cuda:0",
                "timer": "cuda_event",
                "noise": 0.02,
                "calibration_ns": None,
                "peak_allocated_bytes": 1024,
                "peak_reserved_bytes": 2048,
                "metrics": {"speedup": 1.5, "achieved_fraction": 0.7},
                "commit": "b" * 40,
                "recorded_at": "2024-01-01T00:00:00+00:00",
            }
        },
    }


def test_version_1_is_migrated_on_read() -> None:
    entry = load_document(json.dumps(v1_document()), PATH)[KEY]
    assert entry.samples_ns == (1000.0, 1500.0, 2000.0, 2000.0, 2500.0, 3000.0)
    assert entry.round_medians_ns == ()
    assert entry.peak_allocated_bytes == 1024 and entry.peak_reserved_bytes == 2048
    assert entry.environment is not None and entry.environment.torch == "2.1.0"
    assert entry.provenance == Provenance(commit="b" * 40)
    assert entry.metrics == (Metric("achieved_fraction", 0.7), Metric("speedup", 1.5))
    assert entry.noise == 0.02 and entry.recorded_at == "2024-01-01T00:00:00+00:00"


def test_migrated_document_is_valid_current_json() -> None:
    document_v1 = v1_document()
    migrated = migrate.migrate(json.loads(json.dumps(document_v1)), 1)
    schema.validate(migrated, migrate.CURRENT_VERSION, PATH)
    assert migrated["schema_version"] == migrate.CURRENT_VERSION
    assert document_v1 == v1_document()  # the input is not modified


def test_version_1_errors_use_the_version_1_schema() -> None:
    data = v1_document()
    data["entries"][KEY]["samples"] = "many"
    err = error_of(json.dumps(data))
    assert err.json_path == f'$.entries["{KEY}"].samples'
    # a current-format entry in a version-1 file is wrong too
    data = v1_document()
    data["entries"][KEY] = entry_to_json(make_entry())
    assert error_of(json.dumps(data)).json_path == f'$.entries["{KEY}"]'


def test_every_version_has_a_schema_and_a_migration() -> None:
    assert schema.known_versions() == list(range(migrate.OLDEST_VERSION, migrate.CURRENT_VERSION + 1))
    assert sorted(migrate.MIGRATIONS) == list(range(migrate.OLDEST_VERSION, migrate.CURRENT_VERSION))


def test_shipped_schema_validates_every_version() -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema.load_schema())
    validator.validate(json.loads(valid_text()))
    validator.validate(v1_document())
    bad = v1_document()
    del bad["environment"]
    assert not validator.is_valid(bad)


# -- nothing but BaselineError escapes ------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def _leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            paths += _leaf_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            paths += _leaf_paths(v, (*prefix, i))
    return paths


VALID_V2 = json.loads(dump_document(document(make_entry())))
MUTATION_SITES = [(VALID_V2, where) for where in _leaf_paths(VALID_V2)[1:]]
MUTATION_SITES += [(v1_document(), where) for where in _leaf_paths(v1_document())[1:]]


def _check_only_baseline_errors(content: str | bytes) -> None:
    try:
        entries = load_document(content, PATH)
    except BaselineError as exc:
        assert exc.path == PATH
    else:
        assert all(isinstance(e, BaselineEntry) for e in entries.values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_random_json_raises_only_baseline_errors(value: Any) -> None:
    _check_only_baseline_errors(json.dumps(value))
    _check_only_baseline_errors(json.dumps({"schema_version": 2, "entries": value}))


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_baseline_errors(content: bytes) -> None:
    _check_only_baseline_errors(content)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(MUTATION_SITES), json_values)
def test_a_valid_file_with_one_value_replaced_raises_only_baseline_errors(
    site: tuple[dict[str, Any], tuple[Any, ...]], value: Any
) -> None:
    base, where = site
    data = json.loads(json.dumps(base))
    target = data
    for part in where[:-1]:
        target = target[part]
    target[where[-1]] = value
    _check_only_baseline_errors(json.dumps(data))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(MUTATION_SITES), st.integers(min_value=0, max_value=10_000))
def test_a_valid_file_cut_anywhere_raises_only_baseline_errors(
    site: tuple[dict[str, Any], tuple[Any, ...]], cut: int
) -> None:
    text = json.dumps(site[0], indent=2)
    _check_only_baseline_errors(text[: cut % len(text)])
