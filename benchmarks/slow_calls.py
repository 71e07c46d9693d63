"""The cost of pytest-gpuperf on a suite of slow calls (0.1-1 s each), side by side with pytest-benchmark.

A suite of pytest-benchmark tests (the ``benchmark`` fixture, unchanged) whose calls are numpy and
torch work of 0.1 to 1 s, the kind of end-to-end test a real suite has (an array store's round trip,
a model's forward pass). The script writes it into a temporary folder and times three sessions:

1. ``pytest`` with pytest-benchmark alone (``-p no:gpuperf``): what the suite's owners run today;
2. ``pytest --gpuperf-update-baseline``: baselines written;
3. ``pytest --gpuperf``: gated against them, nothing changed.

It prints each session's wall time and the ratios update / pytest-benchmark and gate / pytest-benchmark,
and the exit codes (an unchanged gate should pass). Each call runs single-threaded (one BLAS and one
torch thread), as on a shared CI runner.

    python benchmarks/slow_calls.py [--tests 8] [--scale 1.0] [--keep DIR] [--background-load N]

``--scale`` multiplies every call's work (calibrate it so the calls span 0.1-1 s on your machine; the
script prints the calls' medians as pytest-benchmark measured them). ``--background-load N`` runs N
noisy neighbours (background_load.py: seconds busy, seconds idle) through all three sessions, the
load of a busy shared runner made on purpose.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import written_busy
from background_load import BackgroundLoad

# One test per (kind, repeats): a call repeats the kind's unit step. Units take about 30-40 ms on a
# 2-vCPU cloud VM, one thread each, so these span about 0.1-1 s a call.
SUITE = """
import numpy as np
import pytest
import torch

torch.set_num_threads(1)
SCALE = float({scale!r})
RNG = np.random.default_rng(0)
M = RNG.random((448, 448))
T = torch.randn(256, 512)
W = torch.randn(512, 512) / 22


def numpy_step():
    return float(np.linalg.norm(np.linalg.qr(M @ M.T)[0]))


def torch_step():
    x = T
    for _ in range(20):
        x = torch.tanh(x @ W)
    return float(x.sum())


def chunks_step():
    data = RNG.random(1 << 21)
    return float(np.sort(data)[::97].sum() + np.cumsum(data)[-1])


KINDS = {{"numpy": numpy_step, "torch": torch_step, "chunks": chunks_step}}
CASES = {cases!r}


@pytest.mark.parametrize("kind,repeats", CASES, ids=[f"{{k}}-{{r}}" for k, r in CASES])
def test_call(benchmark, kind, repeats):
    step = KINDS[kind]
    n = max(1, round(repeats * SCALE))

    def call():
        return [step() for _ in range(n)]

    benchmark(call)
"""

REPEATS = (4, 6, 10, 16, 24)
KINDS = ("numpy", "torch", "chunks")
ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def cases(n: int) -> list[tuple[str, int]]:
    """``n`` tests spread over the kinds and the repeat counts."""
    return [(KINDS[i % len(KINDS)], REPEATS[(i * 2) % len(REPEATS)]) for i in range(n)]


def session(folder: Path, args: list[str], log: Path) -> tuple[int, float]:
    env = {**os.environ, **ENV}
    env.pop("PYTEST_ADDOPTS", None)
    started = time.perf_counter()
    with log.open("w") as out:
        rc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=folder, env=env,
                            stdout=out, stderr=subprocess.STDOUT, check=False).returncode  # fmt: skip
    return rc, time.perf_counter() - started


def call_medians(report: Path) -> list[float]:
    data = json.loads(report.read_text())
    return sorted(b["stats"]["median"] for b in data["benchmarks"])


def load() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=8)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--keep", type=Path, help="write the suite and logs here and keep them")
    parser.add_argument("--background-load", type=int, default=0, help="noisy-neighbour processes throughout")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="gpuperf-slow-calls-"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_slow_calls.py").write_text(SUITE.format(scale=args.scale, cases=cases(args.tests)))
    (folder / "pytest.ini").write_text("[pytest]\n")
    print(f"suite: {args.tests} pytest-benchmark tests in {folder}; load before: {load()}")
    print(f"noisy neighbours (background_load.py): {args.background_load}")
    try:
        with BackgroundLoad(args.background_load):
            plain_rc, plain_s = session(folder, ["-p", "no:gpuperf", "--benchmark-json=bench.json"],
                                        folder / "plain.log")  # fmt: skip
            medians = call_medians(folder / "bench.json")
            print(f"calls (pytest-benchmark medians): {medians[0]:.3f} s to {medians[-1]:.3f} s")
            update_rc, update_s = session(folder, ["--gpuperf-update-baseline"], folder / "update.log")
            busy, entries = written_busy(folder / "baselines")
            print(f"entries written busy: {busy} of {entries}")
            gate_rc, gate_s = session(folder, ["--gpuperf"], folder / "gate.log")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"pytest-benchmark session: {plain_s:7.1f} s (exit {plain_rc})")
    print(f"gpuperf update:           {update_s:7.1f} s (exit {update_rc})  {update_s / plain_s:.2f}x")
    print(f"gpuperf gate:             {gate_s:7.1f} s (exit {gate_rc})  {gate_s / plain_s:.2f}x")
    print(f"load after: {load()}")
    return 0 if plain_rc == update_rc == 0 and gate_rc in (0, 1) else 1


if __name__ == "__main__":
    sys.exit(main())
