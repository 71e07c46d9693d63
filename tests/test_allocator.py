"""Every measuring process measures large CPU tensors in one allocator state (allocator.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pytest_gpuperf.measure.allocator import user_set_thresholds

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc thresholds")

# A process put in the faulting state on purpose (every 1 MiB block mapped afresh, as a
# process whose dynamic threshold never rose is), then a runner is made, as every measuring
# process does, and page faults are counted over steady calls of elementwise work.
FAULTS = """
import ctypes, resource, sys, torch
from pytest_gpuperf.measure.runner import Runner, RunnerOptions
torch.set_num_threads(1)
ctypes.CDLL(None).mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD at glibc's start value, held there
if sys.argv[1] == "runner":
    Runner(RunnerOptions(device=torch.device("cpu")))
x = torch.ones(1 << 18)  # 1 MiB
def work():
    y = x
    for _ in range(10):
        y = y * 1.0001
for _ in range(20):
    work()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    work()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str, **env: str) -> int:
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}
    done = subprocess.run([sys.executable, "-c", FAULTS, mode], env=environ, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_a_runner_takes_large_tensors_out_of_the_faulting_state() -> None:
    assert faults("plain") > 1000  # the state the test builds: 256 faults per 1 MiB block
    assert faults("runner") < 50


def test_thresholds_the_user_set_are_kept() -> None:
    assert faults("runner", MALLOC_MMAP_THRESHOLD_="131072") > 1000
    assert user_set_thresholds({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"})
    assert not user_set_thresholds({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"})
