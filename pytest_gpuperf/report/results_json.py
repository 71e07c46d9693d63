"""The session's results as a JSON file (``--gpuperf-json``): written, read, schema-checked.

It holds everything the other reports (and ``gpuperf compare``/``report``) are made from.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema.exceptions

from pytest_gpuperf.errors import ResultsError
from pytest_gpuperf.files import MAX_JSON_BYTES, first_not_a_number, loads_json, read_limited, write_atomic
from pytest_gpuperf.model import SessionResults
from pytest_gpuperf.report import codec

FORMAT = "pytest-gpuperf-results"
# Version history: 1 (0.1.0) the first format; 2 each comparison has a kind and its explanation (the
# rules that reached its verdict), and the verdict "not gated"; 3 the differential profile of a
# confirmed regression (``profile_diff``), the compact op profile of a measurement and of a baseline
# entry; 4 what the ``benchmark`` fixture knows of a measurement's test (``benchmark``:
# pytest-benchmark's names, group, params and extra_info), a measurement's notes with their kind
# (``{"text", "kind"}``, no longer bare strings); 5 a differential profile's explanation (``rows``,
# ``measured``, ``profile_change``, ``finding``, ``basis``), each profiled call's times in op
# profiles (``host_samples_ns``, ``device_samples_ns``) and a note's optional ``topic`` (what it is
# about, by which the terminal groups notes); 6 the scheduler's accounting of each sample
# (``scheduling``, ``corrected_round_medians_ns``), a time comparison's change with the run-queue wait
# taken out (``correction``), a baseline entry's recorded correction and the machine's reference
# (``reference_ns``), what NVML read beside each sample (a measurement's ``device_state``: clocks,
# power, temperature, clock-event reasons, how its energy was measured) and a baseline entry's medians
# of it (its ``device_state``), all optional, the pytest arguments a re-run of a measurement needs
# (``repro_args``: report/repro.py), a time comparison's minimum detectable change (``detectable``,
# optional) and compare-ref's verdict "not resolved" (an interval on both sides of the threshold).
# Older files are read by adding what they lack (``_upgrade``): no kind recorded is taken from the
# comparison's name, a bare note is a notice, a note without a topic has none, the rest is empty (a
# version 4 diff has no explanation rows, a version 5 measurement no scheduling, a version 5 file no
# repro arguments: its repro commands name the test, the mode and the device only).
SCHEMA_VERSION = 6
MAX_BYTES = MAX_JSON_BYTES  # the most a results file may hold (files.py)
_OLDER_VERSIONS = (1, 2, 3, 4, 5)  # read through _upgrade


@cache
def results_schema() -> dict[str, Any]:
    """The JSON schema of a results file (package data)."""
    text = resources.files("pytest_gpuperf").joinpath("schemas").joinpath("results.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def session_to_json(session: SessionResults) -> dict[str, Any]:
    """The results document for ``session`` (not yet validated)."""
    counts = Counter(r.verdict.value for r in session.results)
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        **codec.to_json(session),
        "summary": dict(sorted(counts.items())),
    }


def validate_document(document: object, path: Path | str) -> None:
    """Raise :class:`ResultsError` naming the first schema violation's JSON path."""
    validator = jsonschema.Draft202012Validator(results_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        raise ResultsError(path, error.message, json_path=error.json_path)


def _first_non_finite(value: object, where: str = "$") -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return where
    if isinstance(value, Mapping):
        inner = [(f"{where}.{k}", v) for k, v in value.items()]
    elif isinstance(value, list):
        inner = [(f"{where}[{i}]", v) for i, v in enumerate(value)]
    else:
        return None
    return next((found for path, v in inner if (found := _first_non_finite(v, path))), None)


def dumps_results(session: SessionResults, path: Path | str = "<results>") -> str:
    """The validated results document as text (sorted keys, indent 2, trailing newline)."""
    document = session_to_json(session)
    bad = _first_non_finite(document)
    if bad is not None:
        raise ResultsError(path, "NaN or infinity cannot be stored in JSON", json_path=bad)
    validate_document(document, path)
    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_results(path: Path | str, session: SessionResults) -> Path:
    """Validate and write ``session`` to ``path`` atomically (files.py); returns the path."""
    target = Path(path)
    return write_atomic(target, dumps_results(session, target))


def loads_results(text: str, path: Path | str = "<results>") -> SessionResults:
    """Parse and validate a results document."""
    try:
        return _parse(text, path)
    except RecursionError:  # JSON nested thousands deep: the parser (or the checks after it) runs out of stack
        raise ResultsError(path, "cannot be read: JSON nested too deeply to be a results file") from None


def _parse(text: str, path: Path | str) -> SessionResults:
    try:
        document = loads_json(text)
    except json.JSONDecodeError as exc:
        what = exc.msg.removesuffix(" at")  # "Unterminated string starting at": the place follows
        raise ResultsError(path, f"not JSON: {what} at line {exc.lineno}, column {exc.colno}") from None
    _check_before_upgrade(document, path)
    validate_document(_upgrade(document), path)
    assert isinstance(document, dict)  # the schema says so
    session: SessionResults = codec.from_json(SessionResults, document)
    return session


NOT_A_NUMBER = "NaN or infinity is not a number a results file may hold"
# What ``_upgrade`` walks in a document of an older version, checked before it walks it; the
# full schema is the current version's, checked after.
_UPGRADABLE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"comparisons": {"type": "array"}, "measurement": {"type": "object"}},
            },
        }
    },
}


def _check_before_upgrade(document: object, path: Path | str) -> None:
    """ResultsError, naming the file and JSON path, for what no version of the format holds.

    A version newer than this one reads; a number no float holds (Python's json reads NaN,
    Infinity and integers of any length, which no schema type refuses); a document of an older
    version whose parts ``_upgrade`` walks are not the lists and objects it walks.
    """
    version = document.get("schema_version") if isinstance(document, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        message = f"format version {version} is newer than this pytest-gpuperf reads (up to {SCHEMA_VERSION})"
        raise ResultsError(path, f"{message}: upgrade pytest-gpuperf to read it", json_path="$.schema_version")
    found = first_not_a_number(document)
    if found is not None:
        where, number = found
        message = f"{number.problem}: not a number a results file may hold" if number.integer else NOT_A_NUMBER
        raise ResultsError(path, message, json_path=where)
    if version in _OLDER_VERSIONS:
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(_UPGRADABLE).iter_errors(document))
        if error is not None:
            raise ResultsError(path, error.message, json_path=error.json_path)


def _upgrade(document: object) -> object:
    """An older document as the current version (see ``SCHEMA_VERSION``'s history)."""
    if not isinstance(document, dict) or document.get("schema_version") not in _OLDER_VERSIONS:
        return document
    document.setdefault("repro_args", [])
    results = [r for r in document.get("results", ()) if isinstance(r, dict)]
    if document["schema_version"] == 1:
        for result in results:
            for comparison in result.get("comparisons", ()):
                if isinstance(comparison, dict):
                    prefix = str(comparison.get("metric", "")).split(".", 1)[0]
                    comparison.setdefault("kind", prefix if prefix in ("time", "memory") else "metric")
                    comparison.setdefault("explanation", [])
    for result in results:
        result.setdefault("profile_diff", None)
        for part, field in (("measurement", "op_profile"), ("baseline", "profile"), ("measurement", "benchmark")):
            if isinstance(result.get(part), dict):
                result[part].setdefault(field, None)
        measurement = result.get("measurement")
        if isinstance(measurement, dict) and isinstance(measurement.get("notes"), list):
            measurement["notes"] = [{"text": n, "kind": "notice"} if isinstance(n, str) else n
                                    for n in measurement["notes"]]  # fmt: skip
    document["schema_version"] = SCHEMA_VERSION
    return document


def load_results(path: Path | str) -> SessionResults:
    """Read a results file written by :func:`write_results` (schema-checked): the one reader every command uses.

    ResultsError naming the file for one that cannot be read, is larger than ``MAX_BYTES``
    (read no further than that), is not UTF-8 text, is not JSON or is nested too deeply,
    or fails the schema.
    """
    source = Path(path)
    try:
        raw = read_limited(source, MAX_BYTES)
    except OSError as exc:
        raise ResultsError(source, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise ResultsError(source, f"cannot be read: larger than {MAX_BYTES // 2**20} MiB, the most a results "
                           "file may hold")  # fmt: skip
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsError(source, f"cannot be read: not UTF-8 text (byte {exc.start})") from None
    return loads_results(text, source)
