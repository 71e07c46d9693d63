"""pytest-xdist: two measurements never run on one device at once.

With as many GPUs as workers, each worker gets its own; otherwise the workers sharing a
device take a cross-process file lock around each measurement.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock


@dataclass(frozen=True)
class WorkerInfo:
    """This process's place among the xdist workers (from ``config.workerinput``)."""

    worker_id: str
    index: int
    count: int

    @classmethod
    def from_workerinput(cls, workerinput: Mapping[str, object] | None) -> WorkerInfo | None:
        if not workerinput:
            return None
        worker_id = str(workerinput.get("workerid", "gw0"))
        digits = worker_id.removeprefix("gw")
        index = int(digits) if digits.isdigit() else 0
        count_raw = workerinput.get("workercount", 1)
        count = count_raw if isinstance(count_raw, int) and count_raw > 0 else 1
        return cls(worker_id=worker_id, index=index, count=count)


def pinned_device(spec: str, worker: WorkerInfo | None, cuda_count: int) -> str:
    """Give each worker its own GPU when there are enough of them and the user did not pick one."""
    if worker is None or spec not in ("auto", "cuda") or cuda_count < 2:
        return spec
    return f"cuda:{worker.index % cuda_count}"


def needs_lock(device: str, worker: WorkerInfo | None, cuda_count: int) -> bool:
    """Whether measurements on ``device`` must be serialized across workers."""
    if worker is None or worker.count < 2:
        return False
    return not (device.startswith("cuda") and cuda_count >= worker.count)


def measurement_lock(rootdir: Path, device: str) -> FileLock:
    """One lock per (project, device), in the temp dir all workers of a session share."""
    digest = hashlib.sha256(f"{rootdir.resolve()}|{device}".encode()).hexdigest()[:16]
    return FileLock(Path(tempfile.gettempdir()) / f"pytest-gpuperf-{digest}.lock")
