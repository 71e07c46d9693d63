"""Workers end with their head: a SIGKILLed head leaves no worker spinning."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.test_compare_ref import ARGS, make_repo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the workers"),
]

# The base's test module keeps its worker busy in collection, away from the pipe.
BUSY_AT_COLLECTION = """
import time

_end = time.monotonic() + 120
while time.monotonic() < _end:
    pass

def test_spin(gpu_bench):
    gpu_bench(lambda: sum(range(1000)))
"""


def tagged(tag: str) -> dict[int, int]:
    """Live processes whose environment carries ``tag``: pid -> its parent's pid."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue
        if state != "Z" and f"GPUPERF_LIFELINE_TAG={tag}".encode() in environ:
            found[int(entry.name)] = int(parent)
    return found


def workers(found: dict[int, int], head: int) -> list[int]:
    """The workers among ``found``: forked by the head's zygote, a child of the head."""
    return [pid for pid, parent in found.items() if parent != head and found.get(parent) == head]


def wait_for(condition, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return bool(condition())


def test_workers_end_within_seconds_of_a_sigkilled_head(pytester: pytest.Pytester) -> None:
    root = make_repo(pytester, head_work=20000, base_files={"test_perf.py": BUSY_AT_COLLECTION})
    tag = uuid.uuid4().hex
    env = {**os.environ, "GPUPERF_LIFELINE_TAG": tag, "PYTHONPATH": os.pathsep.join(sys.path)}
    head = subprocess.Popen(
        [sys.executable, "-m", "pytest", *ARGS, "--gpuperf-confirm-pairs=0"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert wait_for(lambda: workers(tagged(tag), head.pid), 120), "no worker started"
        started = set(tagged(tag))  # the zygote and the base worker, busy in its collection
        head.send_signal(signal.SIGKILL)
        head.wait()
        gone = wait_for(lambda: not started & set(tagged(tag)), 5)
        assert gone, f"processes {sorted(started & set(tagged(tag)))} outlived their head by 5 s"
    finally:
        for pid in tagged(tag):
            os.kill(pid, signal.SIGKILL)
        head.kill()
        head.wait()


def test_a_process_whose_parent_is_already_gone_ends_at_once(tmp_path: Path) -> None:
    code = "from pytest_gpuperf.workers import lifeline; lifeline.die_with_parent(1); print('alive')"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
