"""Synthetic noisy neighbours for the benchmarks: busy for seconds, then idle; or CPU hogs, busy throughout.

A shared 2-core runner has noisy phases in which processes a few seconds apart
run up to 1.7x apart, and they come and go on their own: a run cannot choose
its phase. These processes stand in for the
other tenants so that a run can be made in a noisy phase on purpose, the same
for every tool (they run through the whole benchmark, interleaved tools alike).

Each process alternates an idle phase (seconds drawn uniformly from IDLE_S)
and a busy phase (BUSY_S) that streams over a 64 MiB array: a full core, plus
memory bandwidth and last-level cache taken from the measured process. Two of
them on a 2-core machine make anything from no load to both cores busy. The
phases come from a seeded generator, so a run's load is reproducible in kind,
not in timing against the sessions.

The second kind, ``hog``, is a process that spins a full core the whole time (``while True:
pass``): no idle phases and no memory traffic, the steady CPU contention of a runner whose
other jobs never pause (a compile, a data loader). N hogs on a 2-core machine keep N cores'
worth of work queued beside the measured process; the scheduler sees all of it as run-queue
wait. ``BackgroundLoad(n, kind="hog")`` starts them, as the other scripts' ``--hogs N`` do.

    python benchmarks/background_load.py --seed 1     # one intermittent process, until killed
    python benchmarks/background_load.py --kind hog   # one hog, until killed
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from collections.abc import Sequence

KINDS = ("intermittent", "hog")
BUSY_S = (0.5, 3.0)
IDLE_S = (1.0, 6.0)
ARRAY_BYTES = 64 << 20


def run_forever(seed: int) -> None:
    import numpy as np

    rng = random.Random(seed)
    data = np.ones(ARRAY_BYTES // 8)
    scratch = np.empty_like(data)
    while True:
        time.sleep(rng.uniform(*IDLE_S))
        end = time.monotonic() + rng.uniform(*BUSY_S)
        while time.monotonic() < end:
            np.multiply(data, 1.000001, out=scratch)
            data, scratch = scratch, data


def spin_forever() -> None:
    """A full core, forever: the hog (pure Python, so it starts in milliseconds and touches no memory)."""
    while True:
        pass


def describe(processes: int, kind: str = "intermittent") -> dict[str, object]:
    """What a results file records about the load (nothing when there was none)."""
    if kind == "hog":
        return {"processes": processes, "kind": kind}
    return {"processes": processes, "kind": kind, "busy_s": list(BUSY_S), "idle_s": list(IDLE_S),
            "array_bytes": ARRAY_BYTES}  # fmt: skip


class BackgroundLoad:
    """``processes`` load processes of ``kind`` (:data:`KINDS`) for the length of a ``with`` block (none when 0)."""

    def __init__(self, processes: int, seed: int = 0, kind: str = "intermittent") -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind of background load {kind!r}: one of {', '.join(KINDS)}")
        self.processes = processes
        self.seed = seed
        self.kind = kind
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self._procs]

    def __enter__(self) -> BackgroundLoad:
        for i in range(self.processes):
            seed = str(self.seed * 1000 + i)
            self._procs.append(subprocess.Popen([sys.executable, __file__, "--seed", seed, "--kind", self.kind]))
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kind", choices=KINDS, default="intermittent", help="busy-then-idle, or a core throughout")
    args = parser.parse_args(argv)
    if args.kind == "hog":  # until terminated (BackgroundLoad.__exit__)
        spin_forever()
    run_forever(args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
