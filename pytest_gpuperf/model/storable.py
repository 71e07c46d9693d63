"""What every history store keeps alike: the text limits of SQLite and PostgreSQL, declared once.

PostgreSQL refuses a NUL character in text, and its ``VARCHAR(n)`` columns refuse longer
values, where SQLite stores both; neither can encode a lone surrogate as UTF-8. A run that
one backend could store and another could not is refused before either sees it, so every
store holds the same runs: a metric's name and unit where the metric is declared (the
fixture), every text of a run where the run is built (``history/model.py``). The store's
columns (``history/schema.py``) take their lengths from here.

May import: nothing of the package.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

UNIT_MAX_CHARS = 64  # gpuperf_values.unit
STATISTIC_MAX_CHARS = 200  # gpuperf_values.statistic: "time.p50", "metric.NAME", ...
METRIC_STATISTIC_PREFIX = "metric."
METRIC_NAME_MAX_CHARS = STATISTIC_MAX_CHARS - len(METRIC_STATISTIC_PREFIX)  # 193


def unstorable(text: str, *, limit: int | None = None) -> str | None:
    """Why a store cannot keep ``text`` as it is on every backend, worded to follow its name; None: it can."""
    if "\x00" in text:
        return "holds a NUL character, which PostgreSQL cannot store"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid Unicode text (a lone surrogate at character {exc.start})"
    if limit is not None and len(text) > limit:
        return f"is {len(text)} characters long; a history store keeps at most {limit}"
    return None


def first_unstorable(value: object, where: str = "$") -> tuple[str, str] | None:
    """The JSON path and reason of the first text (a key or a value) in a JSON-like value no store can keep."""
    if isinstance(value, str):
        reason = unstorable(value)
        return (where, reason) if reason else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            inner = f"{where}.{key}" if isinstance(key, str) and key.isidentifier() else f"{where}[{json.dumps(key)}]"
            if isinstance(key, str) and (reason := unstorable(key)):
                return inner, f"its key {reason}"
            if found := first_unstorable(item, inner):
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            if found := first_unstorable(item, f"{where}[{index}]"):
                return found
    return None
