"""``gate.json``: who a gate job was and how it ended, kept beside its reports.

The prepare step writes it before pytest starts (``exit_code`` null) and the gate step
fills in the exit code, so the summary, the comment and the ``workflow_run`` comment
workflow (which reads it from the uploaded artifact, written by a pull request's code
and therefore checked field by field) know the comment key and the pull request even
when pytest never ran. ``job_id`` is the job's own id (``job.check_run_id``, the id the
jobs API lists it by; null where the runner does not say it), by which the matrix comment
(matrix_comment.py) tells the matrix jobs that left an artifact from those that did not.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workflow import ActionError

FILE = "gate.json"
REPORT = "comment.md"
KEY_MAX = 200
REPORT_MAX_BYTES = 4 * 1024 * 1024  # far above any comment; a bigger file is cut when read


@dataclass(frozen=True)
class GateRecord:
    key: str
    pull_request: int | None
    exit_code: int | None
    compare_ref: str
    job_id: int | None = None


def write(folder: Path, record: GateRecord) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / FILE
    temp = target.with_name(f".{FILE}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(asdict(record), indent=2) + "\n", encoding="utf-8")
    os.replace(temp, target)
    return target


def _field(payload: dict[str, Any], name: str, kinds: tuple[type, ...], path: Path) -> Any:
    value = payload.get(name)
    # bool is an int to isinstance; a key or exit code of true is still a bad file
    if isinstance(value, bool) or not isinstance(value, kinds):
        names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise ActionError(f"{path}: field {name!r} must be {names}, not {value!r}")
    return value


def load(folder: Path) -> GateRecord:
    """The record in ``folder``; ActionError naming the file and field when it is malformed."""
    path = folder / FILE
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ActionError(f"{path} does not exist: the gate's prepare step did not run") from None
    except UnicodeDecodeError as exc:
        raise ActionError(f"{path}: not readable JSON: not UTF-8 text (byte {exc.start})") from None
    except (OSError, ValueError) as exc:
        raise ActionError(f"{path}: not readable JSON: {exc}") from None
    except RecursionError:
        raise ActionError(f"{path}: not readable JSON: nested too deeply") from None
    if not isinstance(payload, dict):
        raise ActionError(f"{path}: expected a JSON object")
    key = _field(payload, "key", (str,), path)
    if not key.strip() or len(key) > KEY_MAX or any(ord(c) < 32 for c in key):
        raise ActionError(f"{path}: field 'key' must be 1-{KEY_MAX} printable characters")
    number = _field(payload, "pull_request", (int, type(None)), path)
    if number is not None and number <= 0:
        raise ActionError(f"{path}: field 'pull_request' must be a positive number")
    return GateRecord(
        key=key,
        pull_request=number,
        exit_code=_field(payload, "exit_code", (int, type(None)), path),
        compare_ref=_field(payload, "compare_ref", (str,), path),
        job_id=_field(payload, "job_id", (int, type(None)), path) if "job_id" in payload else None,
    )


def report(folder: Path) -> str | None:
    """The Markdown report pytest-gpuperf wrote into ``folder``, or None where it wrote none."""
    path = folder / REPORT
    try:
        with path.open("rb") as f:
            raw = f.read(REPORT_MAX_BYTES)
    except FileNotFoundError:
        return None
    return raw.decode("utf-8", "replace")
