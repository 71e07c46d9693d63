"""benchmarks/background_load.py: its kinds of load, started and stopped with a ``with`` block."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from benchmark_scripts import benchmark_script


def cpu_ticks(pid: int) -> int:
    """User plus system clock ticks the process has run (``/proc/PID/stat``'s 14th and 15th fields)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's CPU time from /proc")
def test_a_hog_spins_a_core_until_the_block_ends() -> None:
    with benchmark_script("background_load") as script, script.BackgroundLoad(1, kind="hog") as load:
        (pid,) = load.pids
        deadline = time.monotonic() + 60
        while cpu_ticks(pid) < 20 and time.monotonic() < deadline:  # 0.2 s of CPU, however busy the machine
            time.sleep(0.1)
        assert cpu_ticks(pid) >= 20
        assert "--kind hog" in Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    assert not Path(f"/proc/{pid}").exists()  # terminated and reaped
    assert load.pids == []


def test_the_kinds_are_named_and_described() -> None:
    with benchmark_script("background_load") as script:
        with pytest.raises(ValueError, match="unknown kind of background load 'spin': one of intermittent, hog"):
            script.BackgroundLoad(1, kind="spin")
        assert script.describe(2, kind="hog") == {"processes": 2, "kind": "hog"}
        assert script.describe(2)["busy_s"] == list(script.BUSY_S)
        with script.BackgroundLoad(0, kind="hog") as none:
            assert none.pids == []
