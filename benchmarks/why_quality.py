"""How often a regression's "why" names the planted cause: planted 3% and 5% regressions in torch CPU workloads.

    python benchmarks/why_quality.py --trials 4 [--old-rev REV] [--json out.json]

Workloads (one intra-op thread, about 2 ms a call), each planted at 3% and 5% of its call:

- ``calls``: ``aten::mm`` called once more per measured call (n -> n+1, n = 1 / share);
- ``slower``: ``aten::tanh`` on a larger input, sized to cost the share more;
- ``added``: an ``aten::sigmoid`` that the base does not run;
- ``host``: Python work outside any operator (``[host time outside operators]``);
- ``unchanged``: the same code on both sides (a confirmed regression there is a false alarm).

Each trial times base and head in alternating rounds and judges them as compare-ref's pairs are
judged (``stats.paired_median_ratio``: the ratio's CI must exclude 1). A confirmed regression
is then explained by the real pipeline (``engine.with_profile_diff`` over real
``torch.autograd.profiler`` passes of both functions, growing by ``profiling/plan.py``). With
``--old-rev``, the same regressions are profiled by that revision's code (three calls a side,
its ``diff_profiles``) in a subprocess, for the figures beside today's. Printed, for confirmed
regressions: the share whose first row names the planted operator with the right sign, the
share with a wrong-sign row presented as a cause (any row of the short report with a negative
change, for the old code; a row with the role ``cause`` and a negative change, for the new),
the share whose causes add up to the measured change within its interval, and the profiling
seconds spent. A benchmark, not a test: CI does not run it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = "[host time outside operators]"
PLANTS = {"calls": "aten::mm", "slower": "aten::tanh", "added": "aten::sigmoid", "host": OUTSIDE, "unchanged": ""}
ROUNDS = 21  # alternating rounds a side
ROUND_S = 0.02  # a round's length
OLD_TOP = 3  # rows the old failure message showed

torch.set_num_threads(1)
A = torch.randn(96, 96)
W = torch.randn(96, 96)
BUF = torch.empty(96, 96)


def _python_work(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def _timed(fn: Callable[[], object], reps: int = 30) -> float:
    fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - start) / reps)
    return best


def workload(shape: str, share: float) -> tuple[Callable[[], object], Callable[[], object]]:
    """(base, head) for ``shape`` with the head ``share`` slower, sized on this machine."""
    mm_calls = round(1 / share) if shape == "calls" else 25
    small = torch.randn(4096)

    def body(mm: int, tanh: torch.Tensor, sigmoid: torch.Tensor | None, python: int) -> None:
        for _ in range(mm):
            torch.mm(A, W, out=BUF)
        torch.tanh(tanh)
        if sigmoid is not None:
            torch.sigmoid(sigmoid)
        torch.relu(BUF).sum()
        if python:
            _python_work(python)

    def base() -> None:
        body(mm_calls, small, None, 0)

    base_s = _timed(base)
    extra_s = share * base_s
    if shape == "calls":
        return base, lambda: body(mm_calls + 1, small, None, 0)
    if shape == "slower":
        x = torch.randn(200_000)
        per_element = _timed(lambda: torch.tanh(x), 10) / x.numel()
        bigger = torch.randn(4096 + max(1, int(extra_s / per_element)))
        return base, lambda: body(mm_calls, bigger, None, 0)
    if shape == "added":
        x = torch.randn(200_000)
        per_element = _timed(lambda: torch.sigmoid(x), 10) / x.numel()
        plant = torch.randn(max(1, int(extra_s / per_element)))
        return base, lambda: body(mm_calls, small, plant, 0)
    if shape == "host":
        per_iteration = _timed(lambda: _python_work(10_000), 10) / 10_000
        return base, lambda: body(mm_calls, small, None, max(1, int(extra_s / per_iteration)))
    return base, base


def alternate(base: Callable[[], object], head: Callable[[], object]) -> tuple[list[float], list[float]]:
    """Per-call medians of alternating rounds of each side (head first in even rounds)."""
    per_round = max(1, int(ROUND_S / _timed(base, 5)))
    rounds: dict[str, list[float]] = {"base": [], "head": []}
    for r in range(ROUNDS):
        order = (("head", head), ("base", base)) if r % 2 == 0 else (("base", base), ("head", head))
        for name, fn in order:
            times = []
            for _ in range(per_round):
                start = time.perf_counter_ns()
                fn()
                times.append(time.perf_counter_ns() - start)
            rounds[name].append(statistics.median(times))
    return rounds["head"], rounds["base"]


# -- the new pipeline -------------------------------------------------------------------------------


def explain_new(base: Callable[[], object], head: Callable[[], object], result: Any) -> tuple[Any, float]:
    from pytest_gpuperf.engine import ProfiledSide, with_profile_diff
    from pytest_gpuperf.profiling.torch_profile import capture_calls

    def side(fn: Callable[[], object], label: str) -> Callable[[int], ProfiledSide]:
        cpu = torch.device("cpu")
        return lambda calls: ProfiledSide(
            capture_calls(fn, (), {}, trace_path=None, label=label, device=cpu, calls=calls, detailed=False).table
        )

    start = time.perf_counter()
    done = with_profile_diff(result, side(head, "head"), side(base, "base"), base_label="base")
    return done.profile_diff, time.perf_counter() - start


def regression(head_rounds: list[float], base_rounds: list[float]) -> tuple[bool, Any]:
    """Whether the pairs confirm a regression, and the MeasurementResult the pipeline explains."""
    from pytest_gpuperf.model import Comparison, Kind, Measurement, MeasurementResult, Verdict
    from pytest_gpuperf.stats import paired_median_ratio

    ratio, low, high, _ = paired_median_ratio(head_rounds, base_rounds)
    base_ns = statistics.median(base_rounds)
    m = Measurement("bench::why", "default", tuple(head_rounds), 1, "cpu", "perf_counter")
    timing = Comparison(key=m.key, metric="time.p50", verdict=Verdict.REGRESSION, current=ratio * base_ns,
                        baseline=base_ns, change=ratio - 1, ci_low=low, ci_high=high, kind=Kind.TIME)  # fmt: skip
    return low > 1.0, MeasurementResult(measurement=m, comparisons=(timing,))


def score_new(diff: Any, planted: str) -> dict[str, Any]:
    causes = [r for r in diff.rows if r.role == "cause"]
    first = diff.rows[0] if diff.rows and diff.rows[0].role == "cause" else None
    rest = next((r for r in diff.rows if r.role == "rest"), None)
    return {
        "first_right": first is not None and first.name == planted and first.delta_ns > 0,
        "wrong_sign": any(r.delta_ns < 0 for r in causes),
        "adds_up": rest is not None and rest.low_ns is not None and rest.low_ns <= 0 <= rest.high_ns,
        "finding": diff.finding,
        "first": None if first is None else [first.name, first.reading, first.delta_ns],
        "calls": diff.head.profiled_calls,
    }


# -- the old pipeline, in a subprocess on another revision's code -----------------------------------


def score_old(diff: Any, planted: str, measured: tuple[float, float, float]) -> dict[str, Any]:
    shown = list(diff.changes[:OLD_TOP])
    total = sum(c.delta_ns for c in diff.changes)
    return {
        "first_right": bool(shown) and shown[0].name == planted and shown[0].delta_ns > 0,
        "wrong_sign": any(c.delta_ns < 0 for c in shown),
        "adds_up": measured[1] <= total <= measured[2],
        "first": [shown[0].name, shown[0].status, shown[0].delta_ns] if shown else None,
    }


def old_worker(cases_path: Path) -> None:
    """Profile each case with the revision on sys.path (its capture_calls and diff_profiles); print JSON."""
    import pytest_gpuperf
    from pytest_gpuperf.profiling.diff import diff_profiles
    from pytest_gpuperf.profiling.torch_profile import capture_calls

    print(f"old pipeline from {pytest_gpuperf.__file__}", file=sys.stderr)
    cpu = torch.device("cpu")
    out = []
    for case in json.loads(cases_path.read_text()):
        base, head = workload(case["shape"], case["share"])
        start = time.perf_counter()
        tables = [capture_calls(fn, (), {}, trace_path=None, label=side, device=cpu, calls=3, detailed=False).table
                  for fn, side in ((head, "head"), (base, "base"))]  # fmt: skip
        diff = diff_profiles(tables[0], tables[1], base_label="base")
        seconds = time.perf_counter() - start
        out.append({**score_old(diff, PLANTS[case["shape"]], tuple(case["measured"])), "seconds": seconds})
    print(json.dumps(out))


def run_old(rev: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "pytest_gpuperf"], check=True,
                             capture_output=True).stdout  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        cases_path = Path(tmp) / "cases.json"
        cases_path.write_text(json.dumps(cases))
        env = {**os.environ, "PYTHONPATH": tmp}
        done = subprocess.run([sys.executable, __file__, "--old-worker", str(cases_path)], env=env, cwd=tmp,
                              check=True, capture_output=True, text=True)  # fmt: skip
        print(*(line for line in done.stderr.splitlines() if line.startswith("old pipeline from")))
        results: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
        return results


# -- the report --------------------------------------------------------------------------------------


def share(rows: list[dict[str, Any]], key: str) -> str:
    return f"{sum(bool(r[key]) for r in rows)}/{len(rows)}" if rows else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4, help="trials per workload and share")
    parser.add_argument("--shares", default="0.03,0.05")
    parser.add_argument("--old-rev", default=None, help="a revision whose why pipeline to score beside today's")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--old-worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.old_worker is not None:
        old_worker(args.old_worker)
        return
    sys.path.insert(0, str(ROOT))
    started = time.perf_counter()
    cases: list[dict[str, Any]] = []
    for trial in range(args.trials):
        for shape in PLANTS:
            for planted_share in [float(s) for s in args.shares.split(",")] if shape != "unchanged" else [0.0]:
                base, head = workload(shape, planted_share or 0.05)
                if shape == "unchanged":
                    head = base
                head_rounds, base_rounds = alternate(base, head)
                confirmed, result = regression(head_rounds, base_rounds)
                case: dict[str, Any] = {"shape": shape, "share": planted_share or 0.05, "trial": trial,
                                        "confirmed": confirmed}  # fmt: skip
                if confirmed:
                    diff, seconds = explain_new(base, head, result)
                    m = diff.measured
                    case.update(measured=[m.delta_ns, m.low_ns, m.high_ns], new={**score_new(diff, PLANTS[shape]),
                                "seconds": seconds})  # fmt: skip
                cases.append(case)
                new = case.get("new", {})
                print(f"{shape:9} {planted_share:.0%} trial {trial}: confirmed={confirmed} "
                      f"{new.get('first')} {new.get('finding')}", flush=True)  # fmt: skip
    planted = [c for c in cases if c["confirmed"] and c["shape"] != "unchanged"]
    if args.old_rev:
        for case, old in zip(planted, run_old(args.old_rev, planted), strict=True):
            case["old"] = old
    print(f"\n{len(cases)} trials, {sum(c['confirmed'] for c in cases)} confirmed "
          f"({sum(c['confirmed'] for c in cases if c['shape'] == 'unchanged')} of them unchanged code); "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    for label in ("new", "old"):
        rows = [c[label] for c in planted if label in c]
        if not rows:
            continue
        seconds = [r["seconds"] for r in rows]
        print(f"{label}: first row names the planted op, right sign {share(rows, 'first_right')}; "
              f"wrong-sign row as a cause {share(rows, 'wrong_sign')}; adds up within the interval "
              f"{share(rows, 'adds_up')}; profiling s per regression median {statistics.median(seconds):.2f} "
              f"max {max(seconds):.2f}")  # fmt: skip
    for shape in PLANTS:
        rows = [c for c in planted if c["shape"] == shape]
        if rows:
            old = f", old {share([c['old'] for c in rows], 'first_right')}" if "old" in rows[0] else ""
            print(f"  {shape:9} new {share([c['new'] for c in rows], 'first_right')}{old}")
    if args.json:
        args.json.write_text(json.dumps(cases, indent=1))


if __name__ == "__main__":
    main()
