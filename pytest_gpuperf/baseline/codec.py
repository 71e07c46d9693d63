"""BaselineEntry <-> JSON, and whole baseline documents <-> text.

The text is canonical (sorted keys, floats rounded to 6 significant digits, a trailing newline), so
writing the same entries twice changes no byte and a git diff shows only real changes. Its layout
(``dump_document``) gives each field of an entry one line: a refreshed entry changes a few lines
(its statistics, samples, noise, provenance, profile), not one per sample.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_gpuperf.baseline import migrate, plausible, schema
from pytest_gpuperf.errors import BaselineError, NonFiniteNumberError
from pytest_gpuperf.files import first_not_a_number, loads_json
from pytest_gpuperf.model import (
    BaselineEntry,
    DeviceSummary,
    Environment,
    Metric,
    OpProfile,
    OpStat,
    Provenance,
    RecordedCorrection,
    SampleStats,
    Throughput,
    WaitSource,
)

SIGNIFICANT_DIGITS = 6


def round_number(value: float) -> float:
    """``value`` rounded to SIGNIFICANT_DIGITS significant digits (idempotent, -0.0 becomes 0.0)."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}") + 0.0


def canonical(value: Any, parts: tuple[str | int, ...] = ()) -> Any:
    """A JSON-ready copy of ``value`` with every float rounded; ints, bools, strings and None unchanged."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NonFiniteNumberError(parts, value, where=schema.json_path(parts).replace("$", "entry", 1))
        return round_number(value)
    if isinstance(value, Mapping):
        return {str(k): canonical(v, (*parts, str(k))) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v, (*parts, i)) for i, v in enumerate(value)]
    return value


def _opt_float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _opt_int(value: int | None) -> int | None:
    return None if value is None else int(value)


def _fields(obj: Any) -> dict[str, Any]:
    """A dataclass's fields by name (unlike ``dataclasses.asdict``, nested values are kept as they are)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


_STAT_TIMES = tuple(f.name for f in dataclasses.fields(SampleStats) if f.name != "count")
_METRIC_BOUNDS = ("tolerance", "absolute_tolerance", "minimum", "maximum")


def profile_to_json(profile: OpProfile) -> dict[str, Any]:
    return {
        "device_type": profile.device_type,
        "profiled_calls": int(profile.profiled_calls),
        "host_ns": float(profile.host_ns),
        "device_ns": _opt_float(profile.device_ns),
        "ops": [
            {
                "name": s.name,
                "kind": s.kind,
                "calls": float(s.calls),
                "host_ns": float(s.host_ns),
                "device_ns": float(s.device_ns),
                **_sample_fields(s.host_samples_ns, s.device_samples_ns),
            }
            for s in profile.ops
        ],
        "omitted_below_ns": float(profile.omitted_below_ns),
        "torch": profile.torch,
        **_sample_fields(profile.host_samples_ns, profile.device_samples_ns),
    }


def _sample_fields(host: tuple[float, ...], device: tuple[float, ...]) -> dict[str, list[float]]:
    """The per-call samples that were taken: a profile without them is written as before they existed."""
    fields = {"host_samples_ns": host, "device_samples_ns": device}
    return {key: [float(v) for v in values] for key, values in fields.items() if values}


def _samples(d: Mapping[str, Any], key: str) -> tuple[float, ...]:
    """Per-call samples; () in a profile written before they were kept."""
    return tuple(float(v) for v in d.get(key, ()))


def profile_from_json(d: Mapping[str, Any]) -> OpProfile:
    return OpProfile(
        device_type=d["device_type"],
        profiled_calls=int(d["profiled_calls"]),
        host_ns=float(d["host_ns"]),
        device_ns=_opt_float(d["device_ns"]),
        ops=tuple(
            OpStat(
                s["name"],
                s["kind"],
                float(s["calls"]),
                float(s["host_ns"]),
                float(s["device_ns"]),
                _samples(s, "host_samples_ns"),
                _samples(s, "device_samples_ns"),
            )
            for s in d["ops"]
        ),
        omitted_below_ns=float(d.get("omitted_below_ns", 0.0)),
        torch=d["torch"],
        host_samples_ns=_samples(d, "host_samples_ns"),
        device_samples_ns=_samples(d, "device_samples_ns"),
    )


def entry_to_json(entry: BaselineEntry) -> dict[str, Any]:
    """The current-version JSON object of one entry; NonFiniteNumberError (a ValueError) for NaN or infinity."""
    s, env = entry.stats, entry.environment
    raw = {
        "stats": {"count": int(s.count), **{name: float(getattr(s, name)) for name in _STAT_TIMES}},
        "samples_ns": [float(x) for x in entry.samples_ns],
        "round_medians_ns": [float(x) for x in entry.round_medians_ns],
        "calls_per_sample": int(entry.calls_per_sample),
        "device": entry.device,
        "timer": entry.timer,
        "noise": _opt_float(entry.noise),
        "calibration_ns": _opt_float(entry.calibration_ns),
        "speed_probe_ns": _opt_float(entry.speed_probe_ns),
        "memory": {
            "peak_allocated_bytes": _opt_int(entry.peak_allocated_bytes),
            "peak_reserved_bytes": _opt_int(entry.peak_reserved_bytes),
        },
        "throughput": {name: _opt_float(value) for name, value in _fields(entry.throughput).items()},
        "metrics": [
            {**_fields(m), "value": float(m.value), **{name: _opt_float(getattr(m, name)) for name in _METRIC_BOUNDS}}
            for m in entry.metrics
        ],
        "environment": None if env is None else {**_fields(env), "extra": dict(env.extra)},
        "provenance": _fields(entry.provenance),
        "recorded_at": entry.recorded_at,
    }
    if entry.profile is not None:  # optional: an entry without one keeps its bytes
        raw["profile"] = profile_to_json(entry.profile)
    if entry.speed_probe_spread is not None:  # optional likewise
        raw["speed_probe_spread"] = float(entry.speed_probe_spread)
    if entry.written_busy is not None:
        raw["written_busy"] = entry.written_busy
    if entry.reference_ns:  # optional: an entry without one (a GPU's, an older one) keeps its bytes
        raw["reference_ns"] = {kind: float(ns) for kind, ns in sorted(entry.reference_ns.items())}
    if entry.correction is not None:  # optional: only an entry written under contention has one
        c = entry.correction
        raw["correction"] = {"samples_ns": [float(x) for x in c.samples_ns], "wait_share": float(c.wait_share),
                             "uncertainty": float(c.uncertainty), "source": c.source.value}  # fmt: skip
    if entry.device_state is not None:  # optional: a GPU's entry, where NVML could be read
        raw["device_state"] = {name: _opt_float(value) for name, value in _fields(entry.device_state).items()}
    result: dict[str, Any] = canonical(raw)
    return result


def check_entry(data: object, path: Path, key: str, *, writing: bool = False) -> None:
    """Check one current-version entry against the schema, then the plausibility rules."""
    schema.validate_entry(data, path, key)
    assert isinstance(data, dict)  # the schema said so
    plausible.check_entry(data, path, key, writing=writing)


def entry_from_json(data: object, *, path: Path | str, key: str) -> BaselineEntry:
    """Decode one current-version entry; BaselineError names ``path`` and ``$.entries[key]...``."""
    check_entry(data, Path(path), key)
    assert isinstance(data, dict)  # check_entry said so
    return decode_entry(data, key)


def decode_entry(d: dict[str, Any], key: str) -> BaselineEntry:
    s, env = d["stats"], d["environment"]
    return BaselineEntry(
        key=key,
        stats=SampleStats(count=int(s["count"]), **{name: float(s[name]) for name in _STAT_TIMES}),
        samples_ns=tuple(float(x) for x in d["samples_ns"]),
        round_medians_ns=tuple(float(x) for x in d["round_medians_ns"]),
        calls_per_sample=int(d["calls_per_sample"]),
        device=d["device"],
        timer=d["timer"],
        noise=_opt_float(d["noise"]),
        calibration_ns=_opt_float(d["calibration_ns"]),
        speed_probe_ns=_opt_float(d.get("speed_probe_ns")),  # optional: entries written before it existed
        speed_probe_spread=_opt_float(d.get("speed_probe_spread")),  # optional too
        written_busy=d.get("written_busy"),  # optional too
        peak_allocated_bytes=_opt_int(d["memory"]["peak_allocated_bytes"]),
        peak_reserved_bytes=_opt_int(d["memory"]["peak_reserved_bytes"]),
        throughput=Throughput(**{name: _opt_float(value) for name, value in d["throughput"].items()}),
        metrics=tuple(
            Metric(**{**m, "value": float(m["value"]), **{name: _opt_float(m[name]) for name in _METRIC_BOUNDS}})
            for m in d["metrics"]
        ),
        environment=None if env is None else Environment(**{**env, "extra": dict(env["extra"])}),
        provenance=Provenance(**d["provenance"]),
        recorded_at=d["recorded_at"],
        profile=profile_from_json(d["profile"]) if d.get("profile") is not None else None,
        correction=_correction(d.get("correction")),
        reference_ns={str(kind): float(ns) for kind, ns in d.get("reference_ns", {}).items()},
        device_state=_device_state(d.get("device_state")),
    )


def _device_state(d: Mapping[str, Any] | None) -> DeviceSummary | None:
    return None if d is None else DeviceSummary(**{name: _opt_float(value) for name, value in d.items()})


def _correction(d: Mapping[str, Any] | None) -> RecordedCorrection | None:
    if d is None:
        return None
    return RecordedCorrection(samples_ns=tuple(float(x) for x in d["samples_ns"]), wait_share=float(d["wait_share"]),
                              uncertainty=float(d["uncertainty"]), source=WaitSource(d["source"]))  # fmt: skip


def where_in_text(exc: json.JSONDecodeError) -> str:
    """``Unterminated string starting at line 1 column 5``: json's message ends in "at" for some errors."""
    return f"{exc.msg.removesuffix(' at')} at line {exc.lineno} column {exc.colno}"


def parse_json(text: str | bytes, path: Path) -> object:
    """The JSON value of a file's content; BaselineError for anything that is not JSON."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BaselineError(
                path, f"not UTF-8 text ({exc.reason} at byte {exc.start}); is this a baseline file?"
            ) from None
    if not text.strip():
        raise BaselineError(path, "the file is empty (an interrupted copy or a bad merge?)")
    try:
        document = loads_json(text)
        found = first_not_a_number(document)
    except json.JSONDecodeError as exc:
        raise BaselineError(path, f"not valid JSON: {where_in_text(exc)} (truncated, or a merge conflict?)") from None
    except ValueError as exc:
        raise BaselineError(path, f"not valid JSON: {exc}") from None
    except RecursionError:
        raise BaselineError(path, "not valid JSON: nested too deeply") from None
    if found is not None:
        raise BaselineError(path, f"not valid JSON: {found[1].problem}", json_path=found[0])
    return document


def parse_document(
    text: str | bytes, path: Path | str, *, validated: Mapping[str, Any] | None = None
) -> migrate.Document:
    """Parse, validate against its version's schema, migrate to the current version, check keys and plausibility.

    ``validated``: entries of an earlier parse of the file; identical ones skip the checks, which are most
    of the cost of re-reading a file another process updated."""
    path = Path(path)
    document = parse_json(text, path)
    version = migrate.document_version(document, path)
    assert isinstance(document, dict)  # document_version checked it
    entries = document.get("entries")
    to_check: list[str] | None = None  # None: every entry
    if validated is not None and version == migrate.CURRENT_VERSION and isinstance(entries, dict):
        schema.validate({**document, "entries": {}}, version, path)
        to_check = [k for k, data in entries.items() if k not in validated or not same_json(validated[k], data)]
        for key in to_check:
            schema.validate_entry(entries[key], path, key)
    else:
        schema.validate(document, version, path)
    if version != migrate.CURRENT_VERSION:
        document = migrate.migrate(document, version)
        schema.validate(document, migrate.CURRENT_VERSION, path)  # a migration bug shows here, not later
    module = document["module"]
    if "::" in module:
        raise BaselineError(path, f"module {module!r} contains '::'; it must be a file path", json_path="$.module")
    for key in document["entries"]:
        check_key(key, module, path)
    for key in document["entries"] if to_check is None else to_check:
        plausible.check_entry(document["entries"][key], path, key)
    return document


def check_key(key: str, module: str, path: Path) -> None:
    """A key of the file of ``module`` must read ``<module>::<test>::<measurement>``."""
    rest = key[len(module) + 2 :] if key.startswith(module + "::") else ""
    if "::" not in rest or rest.startswith("::") or rest.endswith("::"):
        raise BaselineError(
            path,
            f"entry key {key!r} does not belong to this file's module {module!r}"
            f" (keys are '{module}::<test>::<measurement>')",
            json_path=schema.json_path(("entries", key)),
        )


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same: by text, not ==, since True == 1 == 1.0 and the schema tells them apart."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def decode_entries(document: migrate.Document) -> dict[str, BaselineEntry]:
    """The entries of a document that parse_document returned."""
    return {key: decode_entry(data, key) for key, data in document["entries"].items()}


def load_document(text: str | bytes, path: Path | str) -> dict[str, BaselineEntry]:
    """Validate, migrate and decode one baseline file's content (from disk or a git blob)."""
    return decode_entries(parse_document(text, path))


# The document, its entries and each entry are spread over lines; what lies deeper (an entry's fields) is one
# line of compact JSON each. json.dumps indents every level or none, hence this small layout of its own.
EXPANDED_DEPTH = 3


def dump_document(document: migrate.Document) -> str:
    """The canonical text of a document: one line per field of an entry (``EXPANDED_DEPTH``)."""
    return _layout(canonical(document), 0) + "\n"


def _layout(value: Any, depth: int) -> str:
    if not isinstance(value, dict) or not value or depth >= EXPANDED_DEPTH:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
    pad = "  " * (depth + 1)
    members = (f"{pad}{json.dumps(key, ensure_ascii=False)}: {_layout(value[key], depth + 1)}" for key in sorted(value))
    return "{\n" + ",\n".join(members) + "\n" + "  " * depth + "}"
