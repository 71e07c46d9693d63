"""Safe, collision-free file names for device classes and test modules.

A name is a readable slug of the original, used as it is only when the original can be read back from it
(``/`` is written as ``__``); otherwise (upper case, unicode, ``..``, backslashes, NUL, long names, Windows
device names) a ``~`` and a hash of the original follow a truncated slug. ``~`` never occurs in a plain
slug and every name is lower case, so no two names collide, even on case-insensitive file systems.
"""

from __future__ import annotations

import hashlib
import re

MAX_SLUG_CHARS = 96  # leaves room for "~<hash>", ".json" and lock/temp decorations under 255
HASH_CHARS = 16  # 64 bits of sha256
JSON_SUFFIX = ".json"

_UNSAFE = re.compile(r"[^a-z0-9._-]")
_WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(1, 10)} | {f"lpt{i}" for i in range(1, 10)}
)


def module_of(test_id: str) -> str:
    """The test module of a pytest node id or measurement key: the part before the first ``::``."""
    module = test_id.split("::", 1)[0]
    if not module:
        raise ValueError(f"cannot tell the test module of {test_id!r}: it is empty before the first '::'")
    return module


def _slug(text: str) -> str:
    slug = _UNSAFE.sub("_", text.replace("/", "__"))
    slug = slug.lstrip(".-").rstrip(".")  # no hidden files, no option-like names, no Windows trailing dot
    if slug.split(".", 1)[0] in _WINDOWS_RESERVED:
        slug = "_" + slug
    return slug


def safe_name(text: str) -> str:
    """A file-system-safe name for ``text`` that no other text maps to."""
    slug = _slug(text)
    if slug and len(slug) <= MAX_SLUG_CHARS and slug.replace("__", "/") == text:
        return slug
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]
    return f"{slug[:MAX_SLUG_CHARS].rstrip('.')}~{digest}"


def module_file_name(module: str) -> str:
    """The baseline file name of a test module (``tests/test_mm.py`` -> ``tests__test_mm.py.json``)."""
    return safe_name(module) + JSON_SUFFIX


def device_class_dir(device_class: str) -> str:
    """The folder name of a device class."""
    if not device_class:
        raise ValueError("the device class is empty")
    return safe_name(device_class)
