"""pytest-xdist: measurements serialized per device, results merged into one summary and one baseline set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gpuperf.plugin.parallel import WorkerInfo, measurement_lock, needs_lock, pinned_device

pytest.importorskip("xdist")


def test_worker_info_parses_workerinput() -> None:
    assert WorkerInfo.from_workerinput(None) is None
    info = WorkerInfo.from_workerinput({"workerid": "gw3", "workercount": 4})
    assert info == WorkerInfo("gw3", 3, 4)


def test_each_worker_gets_its_own_gpu_when_there_are_enough() -> None:
    w1 = WorkerInfo("gw1", 1, 2)
    assert pinned_device("auto", w1, cuda_count=2) == "cuda:1"
    assert pinned_device("cuda:0", w1, cuda_count=2) == "cuda:0"  # an explicit choice is kept
    assert pinned_device("auto", None, cuda_count=8) == "auto"
    assert not needs_lock("cuda:1", w1, cuda_count=2)
    assert needs_lock("cuda:0", WorkerInfo("gw2", 2, 4), cuda_count=2)
    assert needs_lock("cpu", w1, cuda_count=0)
    assert not needs_lock("cpu", None, cuda_count=0)


def test_lock_is_per_project_and_device(tmp_path: Path) -> None:
    a = measurement_lock(tmp_path, "cpu").lock_file
    assert a == measurement_lock(tmp_path, "cpu").lock_file
    assert a != measurement_lock(tmp_path, "cuda:0").lock_file
    assert a != measurement_lock(tmp_path / "other", "cpu").lock_file


OVERLAP_DETECTOR = """
import fcntl
import os
import time

import pytest

LOCK = os.path.join(os.path.dirname(__file__), "overlap.lock")


def exclusive():
    # Fails if another worker is inside a measured call at the same moment.
    with open(LOCK, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AssertionError("two measurements overlapped")
        time.sleep(0.0005)
        fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.mark.parametrize("n", range(6))
def test_measure(gpu_bench, n):
    gpu_bench(exclusive)
"""


def test_xdist_workers_serialize_and_merge(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_par=OVERLAP_DETECTOR)
    args = [
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        "--gpuperf",
        "--gpuperf-update-baseline",
        "--gpuperf-min-time=0.1",
        "--gpuperf-max-time=0.3",
        f"--gpuperf-json={pytester.path / 'r.json'}",
    ]
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=6)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    entries = json.loads(path.read_text())["entries"]
    assert len(entries) == 6, sorted(entries)
    merged = json.loads((pytester.path / "r.json").read_text())
    assert len(merged["results"]) == 6
    result.stdout.fnmatch_lines(["*test_par.py::test_measure*"])
