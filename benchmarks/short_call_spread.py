"""How much a short call's measured time moves between processes (sessions), timed in blocks as the plugin does.

Each workload (pure Python calls from about 100 ns to 50 us, string-keyed dicts whose
hashing changes with every process's PYTHONHASHSEED among them) is measured by the
runner, as the plugin measures it (blocks of calls, adaptive rounds), once in each of
``--processes`` fresh interpreters. Printed per workload: the per-call median, the
calls per timed block, and the spread of the process medians (the standard deviation
of their logs; and slowest / fastest).

    python benchmarks/short_call_spread.py [--processes 8] [--max-time 0.5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

from _common import ROOT

WORKLOADS = {
    "noop": "lambda: None",
    "sum10": "lambda: sum(range(10))",
    "sum40": "lambda: sum(range(40))",
    "dict20": "lambda: {i: i for i in range(20)}",
    # string keys hash differently in every process (PYTHONHASHSEED): dict probing moves with them
    "strdict": "(lambda d: lambda: [d[k] for k in ('alpha', 'beta', 'gamma', 'delta', 'eps')])"
    "({k: i for i, k in enumerate(('alpha', 'beta', 'gamma', 'delta', 'eps', 'zeta', 'eta'))})",
    "attrs": "(lambda C: lambda: C(1, 'x', 2.0))(__import__('dataclasses').make_dataclass('C', ['a', 'b', 'c']))",
    "sum300": "lambda: sum(range(300))",
    "sum3000": "lambda: sum(range(3000))",
}

_CHILD = """
import json, sys, torch
from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.measure.runner import MeasureSpec, Runner, RunnerOptions
from pytest_gpuperf.measure.host import guard_for
from pytest_gpuperf.modes import plan_for
torch.set_num_threads(1)
device = torch.device("cpu")
runner = Runner(RunnerOptions(device=device, guard=guard_for(device, plan=plan_for("baseline"), pin_cpu="off",
                                                             peak_memory=False)))
settings = MeasureSettings(warmup_time_s=0.05, min_time_s=0.1, max_time_s=float(sys.argv[2]))
out = {}
for name, source in json.loads(sys.argv[1]).items():
    m = runner.measure(MeasureSpec(fn=eval(source), test_id=name, settings=settings))
    out[name] = [m.stats.median_ns, m.calls_per_sample]
print(json.dumps(out))
"""


def spread(medians: list[float]) -> float:
    logs = [math.log(m) for m in medians]
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / max(1, len(logs) - 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--max-time", type=float, default=0.5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    runs: list[dict[str, list[float]]] = []
    for _ in range(args.processes):
        cmd = [sys.executable, "-c", _CHILD, json.dumps(WORKLOADS), str(args.max_time)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                              "PATH": "/usr/bin:/bin"})  # fmt: skip
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{'workload':<9} {'per call':>10} {'calls/sample':>12} {'spread':>7} {'max/min':>8}")
    table = {}
    for name in WORKLOADS:
        medians = [r[name][0] for r in runs]
        per_call = sorted(medians)[len(medians) // 2]
        s, ratio = spread(medians), max(medians) / min(medians)
        table[name] = {"median_ns": per_call, "calls_per_sample": runs[0][name][1], "spread": s, "max_over_min": ratio,
                       "medians_ns": medians}  # fmt: skip
        print(f"{name:<9} {per_call:>8.0f}ns {runs[0][name][1]:>12} {s:>7.1%} {ratio:>8.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"processes": args.processes, "workloads": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
