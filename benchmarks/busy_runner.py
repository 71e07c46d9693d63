"""Baseline mode on a busy runner: a long call slowed under load, and what a busy baseline write costs.

    python benchmarks/busy_runner.py long-call --hogs 3          # a 2.2 s call slowed to 4.4 s, at load 4-5
    python benchmarks/busy_runner.py write-cost --rounds 3       # a write under two neighbours against a quiet one

``long-call`` writes a one-test suite whose call takes about ``--call-s`` seconds (pure Python, one
thread), writes its baseline and gates it with ``--hogs`` processes spinning a core the whole time
(3 on a 2-CPU runner: a load of 4 to 5), first unchanged and then with the call's work doubled. It
prints each session's exit code and the time comparison's verdict, wall change and change less
the run-queue wait. Under default settings the doubled call must fail (exit 1) and the unchanged
one must not.

``write-cost`` writes the baselines of the detection benchmark's suite (detection.py's four torch
tests) ``--rounds`` times with nothing else running and as many times beside two noisy neighbours
(background_load.py), alternated, and prints each write's wall time and the median ratio busy
over quiet (the target: at most 1.5x).

It is a benchmark, not a test: CI does not run it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from background_load import BackgroundLoad
from detection import write_suite

PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:benchmark")

LONG_CALL = """
import os

UNITS = int(os.environ.get("UNITS", "1"))


def work(n):
    total = 0
    for i in range(n):
        total += (i * 7) ^ (i >> 3)
    return total


def test_long_call(gpu_bench):
    gpu_bench(work, {steps} * UNITS)
"""


def run(root: Path, args: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, float, str]:
    start = time.perf_counter()
    proc = subprocess.run([*PYTEST, *args], cwd=root, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})  # fmt: skip
    return proc.returncode, time.perf_counter() - start, proc.stdout + proc.stderr


def time_verdict(results: Path) -> str:
    """``regression, wall +98.7%, less the wait +97.2% (48% waited)``: the time comparison of a results file."""
    (result,) = json.loads(results.read_text())["results"]
    c = next(c for c in result["comparisons"] if c["kind"] == "time")
    wall = "n/a" if c["change"] is None else f"{c['change']:+.1%}"
    said = f"{c['verdict']}, wall {wall}"
    if c.get("correction"):
        said += f", less the wait {c['correction']['change']:+.1%} ({c['correction']['wait_share']:.0%} waited)"
    return said


def steps_for(seconds: float) -> int:
    """Loop steps of ``work`` that take about ``seconds`` here."""
    probe = 200_000
    start = time.perf_counter()
    total = 0
    for i in range(probe):
        total += (i * 7) ^ (i >> 3)
    return max(1, round(probe * seconds / (time.perf_counter() - start)))


def long_call(args: argparse.Namespace) -> int:
    root = Path(tempfile.mkdtemp(prefix="gpuperf-busy-"))
    (root / "test_long.py").write_text(LONG_CALL.format(steps=steps_for(args.call_s)))
    (root / "pytest.ini").write_text("[pytest]\n")
    common = ["--gpuperf-json=out.json"]
    print(f"suite in {root}; {args.hogs} hog(s); load before {os.getloadavg()[0]:.1f}", flush=True)
    failed = 0
    with BackgroundLoad(args.hogs, kind="hog"):
        for label, mode, units in (("write", "--gpuperf-update-baseline", "1"), ("unchanged", "--gpuperf", "1"),
                                   ("doubled", "--gpuperf", "2")):  # fmt: skip
            code, wall, out = run(root, [mode, *common], {"UNITS": units})
            verdict = time_verdict(root / "out.json") if mode == "--gpuperf" else "written"
            print(f"{label:9} exit {code} in {wall:.0f} s (load {os.getloadavg()[0]:.1f}): {verdict}", flush=True)
            expected = {"write": 0, "unchanged": 0, "doubled": 1}[label]
            failed += code != expected
            if code != expected:
                print(out[-3000:])
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


def write_cost(args: argparse.Namespace) -> int:
    root = Path(tempfile.mkdtemp(prefix="gpuperf-write-cost-"))
    write_suite(root, 0)
    walls: dict[str, list[float]] = {"quiet": [], "busy": []}
    for i in range(args.rounds):
        for label, neighbours in (("quiet", 0), ("busy", 2)):
            shutil.rmtree(root / "baselines", ignore_errors=True)
            with BackgroundLoad(neighbours, seed=i):
                code, wall, out = run(root, ["--gpuperf-update-baseline", "--gpuperf-baseline-dir=baselines", "gp"])
            if code != 0:
                print(out[-3000:])
                return 1
            walls[label].append(wall)
            print(f"round {i + 1} {label:5}: {wall:.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    ratios = [b / q for q, b in zip(walls["quiet"], walls["busy"], strict=True)]
    print(f"\nwrite beside two neighbours over a quiet write, paired: median x{statistics.median(ratios):.2f} "
          f"({', '.join(f'x{r:.2f}' for r in ratios)})")  # fmt: skip
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    long_parser = sub.add_parser("long-call", help="a 2.2 s call slowed to 4.4 s under CPU hogs")
    long_parser.add_argument("--hogs", type=int, default=3)
    long_parser.add_argument("--call-s", type=float, default=2.2)
    cost_parser = sub.add_parser("write-cost", help="a baseline write beside two neighbours against a quiet one")
    cost_parser.add_argument("--rounds", type=int, default=3)
    for p in (long_parser, cost_parser):
        p.add_argument("--keep", action="store_true", help="keep the temporary suite")
    args = parser.parse_args(argv)
    return long_call(args) if args.what == "long-call" else write_cost(args)


if __name__ == "__main__":
    sys.exit(main())
