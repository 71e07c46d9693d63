"""The shipped JSON Schema of baseline files and validation errors that point at the fault."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import BaselineError

SCHEMA_RESOURCE = "baseline.schema.json"
MAX_MESSAGE_CHARS = 300
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The schema as shipped in ``pytest_gpuperf/schemas`` (package data)."""
    # Through the regular package: "schemas" has no __init__.py, and resources of
    # namespace packages are not supported alike on every Python this supports.
    text = (resources.files("pytest_gpuperf") / "schemas" / SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every local ``$ref`` replaced by its definition (the schema has no cycles)."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = _inline_refs(defs[node["$ref"].removeprefix("#/$defs/")], defs)
            rest = {k: _inline_refs(v, defs) for k, v in node.items() if k != "$ref"}
            return {**target, **rest}
        return {k: _inline_refs(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


@functools.cache
def _validator(definition: str) -> Any:
    import jsonschema

    defs = load_schema()["$defs"]
    # One definition directly, so errors name the field at fault, not a failed if/then branch;
    # inlined refs make it about twice as fast, which counts for files of hundreds of entries.
    return jsonschema.Draft202012Validator(_inline_refs(defs[definition], defs))


def known_versions() -> list[int]:
    """The document versions the shipped schema defines."""
    found = (re.fullmatch(r"document_v(\d+)", name) for name in load_schema()["$defs"])
    return sorted(int(m.group(1)) for m in found if m)


def json_path(parts: Iterable[object]) -> str:
    """``$.entries["t::x"].stats.median_ns`` for the parts of a path into a document."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and _IDENTIFIER.fullmatch(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(str(part), ensure_ascii=False)}]"
    return out


def validate(document: object, version: int, path: Path) -> None:
    """Check a whole document of schema ``version``; BaselineError names ``path`` and the JSON path."""
    _check(document, f"document_v{version}", path, ())


def validate_entry(data: object, path: Path, key: str) -> None:
    """Check one current-version entry, reported at ``$.entries[key]`` of ``path``."""
    _check(data, "entry_v2", path, ("entries", key))


def _check(instance: object, definition: str, path: Path, prefix: tuple[str, ...]) -> None:
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator(definition).iter_errors(instance))
    if error is None:
        return
    message = error.message
    if len(message) > MAX_MESSAGE_CHARS:  # the message quotes the bad value, which may be a whole entry
        message = message[: MAX_MESSAGE_CHARS - 3] + "..."
    raise BaselineError(path, message, json_path=json_path((*prefix, *error.absolute_path)))
