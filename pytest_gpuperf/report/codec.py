"""Model dataclasses to plain JSON values and back, driven by their type hints.

A new optional field of ``model.py`` is written and read without touching this file; the
schema's ``additionalProperties: false`` fails the round-trip test until the schema learns it.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import types
import typing
from collections.abc import Mapping
from typing import Any

from pytest_gpuperf import model

# Values derived from the fields (key: the attribute that gives it), written for readers and
# skipped on load.
_DERIVED: dict[type, dict[str, str]] = {
    model.Measurement: {"stats": "stats"},
    model.MeasurementResult: {"key": "measurement.key", "verdict": "verdict"},
    model.OpChange: {"status": "status", "delta_ns": "delta_ns"},
    model.ProfileDiff: {"host_delta_ns": "host_delta_ns", "device_delta_ns": "device_delta_ns"},
}


def to_json(value: object) -> Any:
    """A model object (or a container of them) as JSON-ready builtins."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name, attribute in _DERIVED.get(type(value), {}).items():
            out[name] = to_json(operator.attrgetter(attribute)(value))
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls, vars(model))
    return _HINTS[cls]


def from_json(cls: type[Any], data: Mapping[str, Any]) -> Any:
    """Build ``cls`` (a model dataclass) from a schema-checked JSON object."""
    hints, skipped = _hints(cls), _DERIVED.get(cls, {})
    fields = [f.name for f in dataclasses.fields(cls) if f.name in data and f.name not in skipped]
    return cls(**{name: _decode(hints[name], data[name]) for name in fields})


def _decode(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _decode(inner, value)
    if origin is typing.Literal or tp is Any or tp is object:
        return value
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in value)
        return tuple(_decode(a, v) for a, v in zip(args, value, strict=True))
    if origin in (Mapping, dict, typing.Mapping):
        return {str(k): _decode(args[1], v) for k, v in value.items()}
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            return from_json(tp, value)
        if issubclass(tp, enum.Enum):
            return tp(value)
        if tp is float:
            return float(value)
        if tp in (int, str, bool):
            return value
    raise TypeError(f"results codec cannot decode type {tp!r}")
