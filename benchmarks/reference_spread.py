"""The machine's reference (measure/host/cpu/reference.py): its spread between fresh processes, and how it moves
with the load, beside a test's own time.

    python benchmarks/reference_spread.py --processes 8 [--hogs 0,2] [--json out.json]

Each process runs a real measurement of a small workload (``--workload``: elementwise torch work,
a small matmul, or pure Python) through the runner with the reference on, as a baseline-mode
session does, and prints the test's wall and corrected medians and each kind's reference. Per
hog level (processes spinning a core through the whole level, like a busy shared runner) it then
gives, per kind, the spread of the reference between processes (slowest over fastest, and the
normal-scaled MAD of the logs), the spread of the test's corrected time, and the ratio of the
level's medians to the first level's: how far each moved with the load. The machine-state rule
(host/cpu/rules.py, ``REFERENCE_NOISE``) must not call the first spread a change of state.
It is a benchmark, not a test: CI does not run it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from background_load import BackgroundLoad

CHILD = """
import json, sys
import torch
torch.set_num_threads(1)
from pytest_gpuperf.measure.runner import MeasureSpec, Runner, RunnerOptions
from pytest_gpuperf.measure.host import guard_for
from pytest_gpuperf.modes import Mode, plan_for
A = torch.randn(48, 48)
X = torch.randn(4096)
def elementwise():
    for _ in range(100):
        (X * 1.0001 + 0.5).tanh_()
def matmul():
    for _ in range(100):
        torch.mm(A, A).relu_()
def python():
    s = 0
    for i in range(20000):
        s += i * i
    return s
work = {"elementwise": elementwise, "matmul": matmul, "python": python}[sys.argv[1]]
device = torch.device("cpu")
guard = guard_for(device, plan=plan_for(Mode.BASELINE), pin_cpu="off")
runner = Runner(RunnerOptions(device=device, guard=guard, reference=True))
m = runner.measure(MeasureSpec(fn=work, test_id=sys.argv[1]))
print(json.dumps({"wall_ns": m.stats.median_ns, "corrected_ns": m.corrected.median_ns,
                  "wait_share": m.corrected.wait_share, "reference_ns": dict(m.reference_ns)}))
"""


def spread(values: Sequence[float]) -> tuple[float, float]:
    """(slowest / fastest, normal-scaled MAD of the logs) of positive ``values``."""
    logs = [math.log(v) for v in values]
    mid = statistics.median(logs)
    mad = 1.4826 * statistics.median(abs(x - mid) for x in logs)
    return max(values) / min(values), mad


def measure(workload: str, processes: int) -> list[dict[str, object]]:
    out = []
    for i in range(processes):
        proc = subprocess.run([sys.executable, "-c", CHILD, workload], capture_output=True, text=True, check=True)
        reading = json.loads(proc.stdout.strip().splitlines()[-1])
        refs = "  ".join(f"{k} {v / 1000:.1f} us" for k, v in sorted(reading["reference_ns"].items()))
        print(f"  process {i + 1}: test {reading['wall_ns'] / 1000:.1f} us wall, {reading['corrected_ns'] / 1000:.1f} "
              f"us corrected ({reading['wait_share']:.0%} waited); {refs}", flush=True)  # fmt: skip
        out.append(reading)
    return out


def summarize(levels: dict[int, list[dict[str, object]]]) -> list[str]:
    lines = ["", "| hogs | what | slowest/fastest | MAD of logs | median vs the first level |", "|---|---|---|---|---|"]
    first: dict[str, float] = {}
    for hogs, readings in levels.items():
        series: dict[str, list[float]] = {"test (corrected)": [float(r["corrected_ns"]) for r in readings]}  # type: ignore[arg-type]
        for r in readings:
            for kind, ns in r["reference_ns"].items():  # type: ignore[union-attr]
                series.setdefault(kind, []).append(float(ns))
        for name, values in series.items():
            ratio, mad = spread(values)
            mid = statistics.median(values)
            first.setdefault(name, mid)
            lines.append(f"| {hogs} | {name} | x{ratio:.3f} | {mad:.1%} | x{mid / first[name]:.3f} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--workload", choices=("elementwise", "matmul", "python"), default="elementwise")
    parser.add_argument("--hogs", default="0", help="comma-separated numbers of spinning processes, one level each")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    levels: dict[int, list[dict[str, object]]] = {}
    for hogs in (int(h) for h in args.hogs.split(",")):
        print(f"{hogs} hog(s), load average {os.getloadavg()[0]:.1f}:", flush=True)
        with BackgroundLoad(hogs, kind="hog"):
            levels[hogs] = measure(args.workload, args.processes)
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, workload {args.workload}, "
          f"{args.processes} processes per level")  # fmt: skip
    print("\n".join(summarize(levels)))
    if args.json:
        args.json.write_text(json.dumps({"workload": args.workload, "levels": levels}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
