"""Schema versions of baseline files and the migrations between them (pyperf style). Version history:

1. The first draft format. One ``environment`` per file; per entry the raw samples as ``samples``,
   the peaks as top-level ``peak_*_bytes``, metrics as a bare ``{name: value}`` map (tolerances
   came from the test each run) and only the ``commit`` of the run.
2. (current) Per-entry ``environment`` (machines of one device class share a file), ``samples_ns``
   plus ``round_medians_ns``, ``memory`` and ``throughput`` objects, metrics as a list of full
   ``Metric`` records (the tolerance and bounds travel with the baseline) and a ``provenance``
   object (commit, branch, dirty, commit date).

A loader validates a document against the schema of *its* version, then migrates it
in memory one version at a time; a file is rewritten only when an update changes an entry of it.

The text's layout is no part of a version: any JSON layout of a document reads alike. Files of
version 2 were written one value a line, then one field of an entry a line (``codec.dump_document``);
a file of the earlier layout takes the new one when an update first changes one of its entries.
Migrations are frozen history: they spell the old defaults out instead of reading today's model.

Device classes have a history too: a CPU class once was the model name alone (``cpu-amd-epyc``); it
now names the kernels torch dispatches to (``cpu-amd-epyc--avx512-bf16``). An old entry that recorded
its ``cpu_isa`` belongs to its kernels' class (``current_class``) and is moved there by
``BaselineStore.migrate_legacy_class``; one that did not stays, and reads "not comparable".
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import BaselineError
from pytest_gpuperf.model import BaselineEntry, device_class

CURRENT_VERSION = 2
OLDEST_VERSION = 1

Document = dict[str, Any]


def document_version(document: object, path: Path) -> int:
    """The ``schema_version`` of a parsed document, checked to be one this version can read."""
    if not isinstance(document, dict):
        raise BaselineError(path, f"expected a JSON object, found {_json_type(document)}", json_path="$")
    if "schema_version" not in document:
        raise BaselineError(path, "missing 'schema_version'; is this a pytest-gpuperf baseline file?", json_path="$")
    version = document["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise BaselineError(path, f"schema_version must be an integer, found {version!r}", json_path="$.schema_version")
    if version > CURRENT_VERSION:
        raise BaselineError(
            path,
            f"schema_version {version} was written by a newer pytest-gpuperf (this one reads versions "
            f"{OLDEST_VERSION} to {CURRENT_VERSION}); upgrade pytest-gpuperf to read or update it",
            json_path="$.schema_version",
        )
    if version < OLDEST_VERSION:
        raise BaselineError(
            path,
            f"unknown schema_version {version} (known: {OLDEST_VERSION} to {CURRENT_VERSION})",
            json_path="$.schema_version",
        )
    return version


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _v1_to_v2(document: Document) -> Document:
    environment = document["environment"]
    entries: dict[str, Any] = {}
    for key, old in document["entries"].items():
        entries[key] = {
            "stats": old["stats"],
            "samples_ns": old["samples"],
            "round_medians_ns": [],
            "calls_per_sample": old["calls_per_sample"],
            "device": old["device"],
            "timer": old["timer"],
            "noise": old["noise"],
            "calibration_ns": old["calibration_ns"],
            "memory": {
                "peak_allocated_bytes": old["peak_allocated_bytes"],
                "peak_reserved_bytes": old["peak_reserved_bytes"],
            },
            "throughput": {"items": None, "flops": None, "bytes": None},
            "metrics": [
                # v1 kept only the value; the gate then applied the defaults of that time.
                {
                    "name": name,
                    "value": value,
                    "unit": "",
                    "better": "higher",
                    "tolerance": 0.10,
                    "absolute_tolerance": None,
                    "minimum": None,
                    "maximum": None,
                    "description": "",
                }
                for name, value in sorted(old["metrics"].items())
            ],
            "environment": copy.deepcopy(environment),
            "provenance": {"commit": old["commit"], "branch": None, "dirty": None, "commit_date": None},
            "recorded_at": old["recorded_at"],
        }
    return {
        "schema_version": 2,
        "device_class": document["device_class"],
        "module": document["module"],
        "entries": entries,
    }


# MIGRATIONS[v] turns a valid version-v document into a valid version v+1 document.
MIGRATIONS: dict[int, Callable[[Document], Document]] = {1: _v1_to_v2}


def migrate(document: Document, version: int) -> Document:
    """Walk a validated version-``version`` document up to CURRENT_VERSION (a new dict)."""
    while version < CURRENT_VERSION:
        document = MIGRATIONS[version](document)
        version += 1
    return document


def current_class(entry: BaselineEntry, filed_under: str) -> str:
    """The device class ``entry`` (filed under ``filed_under``) belongs to today: a CPU class without
    kernels gains them from the entry's recorded ``cpu_isa``; without one, what ran there is unknown."""
    base, kernels = device_class.split(filed_under)
    isa = entry.environment.extra.get("cpu_isa") if entry.environment is not None else None
    if kernels is not None or not device_class.is_cpu(filed_under) or not isa:
        return filed_under
    return f"{base}{device_class.KERNEL_SEPARATOR}{device_class.kernel_tag_of_isa(isa)}"


def in_current_class(entry: BaselineEntry, filed_under: str) -> BaselineEntry:
    """``entry`` with its environment's class migrated (``current_class``); the same object when unchanged."""
    cls = current_class(entry, filed_under)
    if entry.environment is None or entry.environment.device_class == cls:
        return entry
    return dataclasses.replace(entry, environment=dataclasses.replace(entry.environment, device_class=cls))
