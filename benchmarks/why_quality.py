"""How often a regression's "why" names the planted cause: planted 3% and 5% regressions in torch CPU workloads.

    python benchmarks/why_quality.py --trials 4 [--old-rev REV] [--json out.json]
    python benchmarks/why_quality.py --cases cuda --json why_cuda.json   # the CUDA cases alone
    python benchmarks/why_quality.py --cases replaced --trials 2 [--old-rev REV]  # the GPT attention switch alone

Workloads (one intra-op thread, about 2 ms a call), each planted at 3% and 5% of its call:

- ``calls``: ``aten::mm`` called once more per measured call (n -> n+1, n = 1 / share);
- ``slower``: ``aten::tanh`` on a larger input, sized to cost the share more;
- ``added``: an ``aten::sigmoid`` that the base does not run;
- ``host``: Python work outside any operator (``[host time outside operators]``);
- ``unchanged``: the same code on both sides (a confirmed regression there is a false alarm).

Replacements inside a larger model (once a trial, not planted at a share; ``--cases replaced``: these
alone): a small
GPT in nanoGPT's shape (tests/gpt_block.py: 2 layers, width 128, 128 tokens, batch 4) whose
attention switches from ``F.scaled_dot_product_attention`` to the manual matmul, ``masked_fill``
and ``softmax`` path, as nanoGPT's ``self.flash`` does:

- ``attention``: its forward; ``attention+backward``: forward and backward. The first row is
  right when it names an operator of the manual path (``aten::bmm``, ``aten::_softmax``,
  ``aten::masked_fill_``, ``aten::_softmax_backward_data``) with a positive change; also scored:
  whether the short report (the failure message's three causes and their rest row) shows the removed
  fused operator and adds up to the measured change, and whether the PR comment's headline names an
  operator of the manual path.

Each trial times base and head in alternating rounds and judges them as compare-ref's pairs are
judged (``stats.paired_median_ratio``: the ratio's CI must exclude 1). A confirmed regression
is then explained by the real pipeline (``engine.with_profile_diff`` over real
``torch.autograd.profiler`` passes of both functions, growing by ``profiling/plan.py``). With
``--old-rev``, the same regressions are profiled by that revision's code (three calls a side,
its ``diff_profiles``) in a subprocess, for the figures beside today's. Printed, for confirmed
regressions: the share whose first row names the planted operator with the right sign, the
share with a wrong-sign row presented as a cause (any row of the short report with a negative
change, for the old code; a row with the role ``cause`` and a negative change, for the new),
the share whose causes add up to the measured change within its interval, the share whose short
report's rows and rest row sum to the measured change, and the profiling seconds spent. A
revision with the explanation's rows (``ProfileDiff.rows``) is scored as today's code is, over the
calls today's code took, with its own short report and headline. ``--json`` writes
``{"cpu": [trials], "cuda": {"figure", "cases"}}`` (null for a part not run).

CUDA cases (when ``torch.cuda.is_available()``; on the CPU one line says they were skipped), a
few trials each, timed with a synchronize after each call and explained on CUDA:

- ``matmul_layout``: a half-precision matmul whose input is non-contiguous (rows padded to an odd
  leading dimension), so cuBLAS takes a slower path;
- ``extra_launch``: one more launch of a ``sigmoid`` kernel per call;
- ``triton_slower``: a Triton kernel doing more work per element (skipped when triton does not import);
- ``host_only``: Python work before the launches, no kernel changed.

A case is ``ok`` when every trial confirms the regression and the explanation's first row is a
cause with a positive change that names one of the kernels the planted op launches when profiled
alone (``[host time outside operators]`` for ``host_only``), no cause has the wrong sign, and the
rows compare device time (host time for ``host_only``). Its last line, ``figure: ...``, sums it up;
the exit status is 1 when a case FAILED. A benchmark, not a test: CI does not run it.
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
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

import torch
from _common import ROOT, shared_test_helper

try:
    import triton
    import triton.language as tl
except ImportError:  # the triton case is then reported as skipped
    triton = None

OUTSIDE = "[host time outside operators]"
PLANTS = {"calls": "aten::mm", "slower": "aten::tanh", "added": "aten::sigmoid", "host": OUTSIDE, "unchanged": ""}
# The replacement cases (a model's attention switched), whether each runs backward too, what the switch adds and removes
REPLACED = {"attention": False, "attention+backward": True}
MANUAL_ATTENTION = frozenset({"aten::bmm", "aten::_softmax", "aten::masked_fill_", "aten::_softmax_backward_data"})
FUSED_ATTENTION = frozenset({"aten::_scaled_dot_product_flash_attention_for_cpu",
                             "aten::_scaled_dot_product_flash_attention_for_cpu_backward"})  # fmt: skip
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
    """(base, head) for ``shape`` with the head ``share`` slower, sized on this machine; a replacement case
    (``REPLACED``) is the model with its attention switched, whatever that costs."""
    if shape in REPLACED:
        gpt = shared_test_helper("gpt_block")
        return gpt.gpt_step(True, REPLACED[shape], gpt.GptShape()), gpt.gpt_step(False, REPLACED[shape], gpt.GptShape())
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


def explain_new(
    base: Callable[[], object], head: Callable[[], object], result: Any, device: str = "cpu"
) -> tuple[Any, float]:
    from pytest_gpuperf.engines.results import with_profile_diff
    from pytest_gpuperf.measure.profiled import ProfiledSide
    from pytest_gpuperf.profiling.torch_profile import capture_calls

    def side(fn: Callable[[], object], label: str) -> Callable[[int], ProfiledSide]:
        where = torch.device(device)
        return lambda calls: ProfiledSide(
            capture_calls(fn, (), {}, trace_path=None, label=label, device=where, calls=calls, detailed=False).table
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


def named(name: str | None, planted: str | frozenset[str]) -> bool:
    return name is not None and (name in planted if isinstance(planted, frozenset) else name == planted)


def score_new(diff: Any, planted: str | frozenset[str]) -> dict[str, Any]:
    causes = [r for r in diff.rows if r.role == "cause"]
    first = diff.rows[0] if diff.rows and diff.rows[0].role == "cause" else None
    rest = next((r for r in diff.rows if r.role == "rest"), None)
    return {
        "first_right": first is not None and named(first.name, planted) and first.delta_ns > 0,
        "wrong_sign": any(r.delta_ns < 0 for r in causes),
        "adds_up": rest is not None and rest.low_ns is not None and rest.low_ns <= 0 <= rest.high_ns,
        **short_report(diff, planted),
        "finding": diff.finding,
        "first": None if first is None else [first.name, first.reading, first.delta_ns],
        "calls": diff.head.profiled_calls,
    }


def short_report(diff: Any, planted: str | frozenset[str]) -> dict[str, Any]:
    """What the failure message and the PR comment's title show, by the code that renders them: whether the rows
    shown and their rest row sum to the measured change, the removed fused op among them, the headline's op."""
    from pytest_gpuperf.report.why import headline, shown_rows

    shown = [r for r in shown_rows(diff) if r.role in ("cause", "replaced", "rest")]
    target = diff.measured or diff.profile_change
    words = headline(diff) or ""
    lead = words.split(" (")[0].split(" ", 2)[-1] if words else None  # "+2.185 ms aten::bmm (added...": the op
    return {
        "shown_adds_up": target is not None and abs(sum(r.delta_ns for r in shown) - target.delta_ns) < 1.0,
        "removed_shown": any(r.name in FUSED_ATTENTION and r.delta_ns < 0 for r in shown),
        "headline_right": named(lead, planted),
        "headline": words,
        "shown": [[r.name, r.reading, r.role, r.delta_ns] for r in shown],
    }


# -- the old pipeline, in a subprocess on another revision's code -----------------------------------


def score_old(diff: Any, planted: str | frozenset[str], measured: tuple[float, float, float]) -> dict[str, Any]:
    shown = list(diff.changes[:OLD_TOP])
    total = sum(c.delta_ns for c in diff.changes)
    return {
        "first_right": bool(shown) and named(shown[0].name, planted) and shown[0].delta_ns > 0,
        "wrong_sign": any(c.delta_ns < 0 for c in shown),
        "adds_up": measured[1] <= total <= measured[2],
        "first": [shown[0].name, shown[0].status, shown[0].delta_ns] if shown else None,
    }


def planted_of(shape: str) -> str | frozenset[str]:
    return MANUAL_ATTENTION if shape in REPLACED else PLANTS[shape]


def old_worker(cases_path: Path) -> None:
    """Profile each case with the revision on sys.path (its capture_calls and diff_profiles); print JSON. A revision
    with the explanation's rows explains the case's measured change and is scored as today's code is."""
    import pytest_gpuperf
    from pytest_gpuperf.model import MeasuredChange, ProfileDiff
    from pytest_gpuperf.profiling.diff import diff_profiles
    from pytest_gpuperf.profiling.torch_profile import capture_calls

    print(f"old pipeline from {pytest_gpuperf.__file__}", file=sys.stderr)
    explains = "rows" in ProfileDiff.__dataclass_fields__
    cpu = torch.device("cpu")
    out = []
    for case in json.loads(cases_path.read_text()):
        base, head = workload(case["shape"], case["share"])
        calls = case["new"]["calls"] if explains else 3
        start = time.perf_counter()
        tables = [capture_calls(fn, (), {}, trace_path=None, label=side, device=cpu, calls=calls, detailed=False).table
                  for fn, side in ((head, "head"), (base, "base"))]  # fmt: skip
        planted = planted_of(case["shape"])
        if explains:
            diff = diff_profiles(tables[0], tables[1], base_label="base", measured=MeasuredChange(*case["measured"]))
            score = score_new(diff, planted)
        else:
            score = score_old(diff_profiles(tables[0], tables[1], base_label="base"), planted, tuple(case["measured"]))
        out.append({**score, "seconds": time.perf_counter() - start})
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


# -- CUDA cases --------------------------------------------------------------------------------------

CUDA_CASES = ("matmul_layout", "extra_launch", "triton_slower", "host_only")
CUDA_TRIALS = 3
N = 2048  # the matmul's size (half precision)
ELEMENTS = 1 << 25  # inputs of 128 MiB (fp32): a launch's device time, bandwidth-bound, well over its host cost
TRITON_REPEAT = 256  # the slowed Triton kernel's multiply-adds per element (the base does one)
HOST_SHARE = 0.3  # host_only: Python work worth this share of the base call, before the launches

if triton is not None:

    @triton.jit
    def scaled(x_ptr, out_ptr, n, REPEAT: tl.constexpr, BLOCK: tl.constexpr):
        """``out = x`` through REPEAT multiply-adds: REPEAT sets the work per element."""
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        y = tl.load(x_ptr + offsets, mask=mask)
        for _ in range(REPEAT):
            y = y * 1.0001 + 0.5
        tl.store(out_ptr + offsets, y, mask=mask)


@dataclass(frozen=True)
class CudaWorkload:
    base: Callable[[], object]
    head: Callable[[], object]
    planted: Callable[[], object] | None  # the planted op alone (its kernels are the right names); None: host work
    basis: str  # the time the rows must compare: "device", or "host" for a host-only slowdown


def synced(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` then a synchronize: a call's wall time holds its kernels (timing only; profiles take ``fn``)."""
    return lambda: (fn(), torch.cuda.synchronize())


def cuda_workload(case: str) -> CudaWorkload:
    """Base and head of ``case`` on the current CUDA device: a matmul, sigmoid launches and a Triton kernel."""
    dev = torch.device("cuda")
    w = torch.randn(N, N, device=dev, dtype=torch.half)
    x = torch.randn(N, N, device=dev, dtype=torch.half)
    padded = torch.randn(N, N + 1, device=dev, dtype=torch.half)[:, :N]  # non-contiguous: leading dimension N + 1
    mm_out = torch.empty(N, N, device=dev, dtype=torch.half)
    v = torch.randn(ELEMENTS, device=dev)
    v_out, t_out = torch.empty_like(v), torch.empty_like(v)

    def triton_op(repeat: int) -> None:
        if triton is not None:
            scaled[(triton.cdiv(ELEMENTS, 1024),)](v, t_out, ELEMENTS, REPEAT=repeat, BLOCK=1024)

    def body(a: torch.Tensor, sigmoids: int, repeat: int, python: int) -> None:
        if python:
            _python_work(python)  # before the launches: the GPU waits for it
        torch.mm(a, w, out=mm_out)
        for _ in range(sigmoids):
            torch.sigmoid(v, out=v_out)
        triton_op(repeat)

    def base() -> None:
        body(x, 2, 1, 0)

    if case == "matmul_layout":
        return CudaWorkload(base, lambda: body(padded, 2, 1, 0), lambda: torch.mm(padded, w, out=mm_out), "device")
    if case == "extra_launch":
        return CudaWorkload(base, lambda: body(x, 3, 1, 0), lambda: torch.sigmoid(v, out=v_out), "device")
    if case == "triton_slower":
        return CudaWorkload(base, lambda: body(x, 2, TRITON_REPEAT, 0), lambda: triton_op(TRITON_REPEAT), "device")
    if case == "host_only":
        per_iteration = _timed(lambda: _python_work(10_000), 10) / 10_000
        python = max(1, int(HOST_SHARE * _timed(synced(base)) / per_iteration))
        return CudaWorkload(base, lambda: body(x, 2, 1, python), None, "host")
    raise ValueError(f"unknown CUDA case {case!r}; known: {', '.join(CUDA_CASES)}")


def kernels_of(fn: Callable[[], object]) -> set[str]:
    """The names of the kernels ``fn`` launches, from a profile of one call of it alone."""
    from torch.autograd.profiler import profile

    fn()
    torch.cuda.synchronize()
    with profile(use_device="cuda", use_kineto=True) as prof:
        fn()
        torch.cuda.synchronize()
    return {str(e.key) for e in prof.function_events if e.device_type == torch.autograd.DeviceType.CUDA}


def score_cuda(diff: Any, expected: set[str], basis: str) -> dict[str, Any]:
    """Whether ``diff`` names the plant: a positive cause first, among ``expected``; no wrong-sign cause; ``basis``."""
    from pytest_gpuperf.profiling.torch_profile import launch_base

    first = diff.rows[0] if diff.rows and diff.rows[0].role == "cause" else None
    problems = []
    if first is None:
        problems.append(f"no cause first (finding {diff.finding})")
    elif launch_base(first.name) not in expected:
        problems.append(f"first row {first.name!r} is not the planted {' / '.join(sorted(expected))}")
    elif first.delta_ns <= 0:
        problems.append(f"first row {first.name!r} has the wrong sign")
    if any(r.role == "cause" and r.delta_ns < 0 for r in diff.rows):
        problems.append("a cause with the wrong sign")
    if diff.basis != basis:
        problems.append(f"rows compare {diff.basis} time, not {basis} time")
    return {
        "ok": not problems,
        "problems": problems,
        "first": None if first is None else [first.name, first.reading, first.delta_ns],
        "basis": diff.basis,
        "finding": diff.finding,
        "host_delta_ns": diff.host_delta_ns,
        "device_delta_ns": diff.device_delta_ns,
    }


def cuda_trial(work: CudaWorkload, expected: set[str]) -> dict[str, Any]:
    head_rounds, base_rounds = alternate(synced(work.base), synced(work.head))
    confirmed, result = regression(head_rounds, base_rounds)
    change = statistics.median(head_rounds) / statistics.median(base_rounds) - 1
    trial: dict[str, Any] = {"confirmed": confirmed, "change": change}
    if not confirmed:
        return {**trial, "ok": False, "problems": [f"regression not confirmed ({change:+.1%})"]}
    diff, seconds = explain_new(work.base, work.head, result, "cuda")
    return {**trial, **score_cuda(diff, expected, work.basis), "seconds": seconds}


def verdict(case: dict[str, Any]) -> str:
    """A CUDA case's: ``skipped``, ``ok`` (every trial named right) or ``FAILED``."""
    if "skipped" in case:
        return "skipped"
    return "ok" if "error" not in case and all(t["ok"] for t in case["trials"]) else "FAILED"


def case_line(case: dict[str, Any]) -> str:
    """``name ok|FAILED|skipped`` and why, for one CUDA case."""
    if "skipped" in case:
        return f"{case['case']:14} skipped: {case['skipped']}"
    if "error" in case:
        return f"{case['case']:14} FAILED: {case['error']}"
    trials = case["trials"]
    good = sum(t["ok"] for t in trials)
    firsts = sorted({t["first"][0] for t in trials if t.get("first")})
    problems = sorted({p for t in trials for p in t.get("problems", [])})
    changes = ", ".join(f"{t['change']:+.1%}" for t in trials)
    detail = f"first row {' | '.join(firsts) or '-'}" + (f"; {'; '.join(problems)}" if problems else "")
    return f"{case['case']:14} {verdict(case)}: {good}/{len(trials)} trials named right ({changes}); {detail}"


def run_cuda(trials: int, save: Callable[[list[dict[str, Any]]], None]) -> tuple[list[dict[str, Any]], str]:
    """Each CUDA case's trials, printed and saved as each case ends (a run cut short keeps them); the summary
    figure. No CUDA: nothing run."""
    if not torch.cuda.is_available():
        return [], "why on CUDA: skipped, torch.cuda.is_available() is False"
    cases: list[dict[str, Any]] = []
    for name in CUDA_CASES:
        case: dict[str, Any] = {"case": name}
        if name == "triton_slower" and triton is None:
            case["skipped"] = "triton does not import"
        else:
            try:
                work = cuda_workload(name)
                expected = {OUTSIDE} if work.planted is None else kernels_of(work.planted)
                case.update(expected=sorted(expected), basis=work.basis,
                            trials=[cuda_trial(work, expected) for _ in range(trials)])  # fmt: skip
            except Exception as exc:  # one case's error (a Triton build, a CUDA error) leaves the others to run
                case["error"] = f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
        cases.append(case)
        print(case_line(case), flush=True)
        save(cases)
    run = [c for c in cases if verdict(c) != "skipped"]
    failed = [c["case"] for c in run if verdict(c) == "FAILED"]
    skipped = [c["case"] for c in cases if verdict(c) == "skipped"]
    figure = f"why on CUDA ({torch.cuda.get_device_name()}): {len(run) - len(failed)}/{len(run)} cases named right"
    figure += f", FAILED: {', '.join(failed)}" if failed else ""
    figure += f", skipped: {', '.join(skipped)}" if skipped else ""
    return cases, figure


# -- the report --------------------------------------------------------------------------------------


def share(rows: list[dict[str, Any]], key: str) -> str:
    return f"{sum(bool(r[key]) for r in rows)}/{len(rows)}" if rows else "-"


def jobs(args: argparse.Namespace) -> list[tuple[str, float]]:
    """(shape, share) of each CPU case of one trial: the planted shapes at each share, then the replacements."""
    shares = [float(s) for s in args.shares.split(",")]
    planted = [(shape, share) for shape in PLANTS for share in (shares if shape != "unchanged" else [0.0])]
    return (planted if args.cases != "replaced" else []) + [(shape, 0.0) for shape in REPLACED]


def run_cpu(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The planted CPU regressions and the replacements: each trial printed as it ends, then the shares."""
    started = time.perf_counter()
    cases: list[dict[str, Any]] = []
    for trial in range(args.trials):
        for shape, planted_share in jobs(args):
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
                case.update(measured=[m.delta_ns, m.low_ns, m.high_ns], new={**score_new(diff, planted_of(shape)),
                            "seconds": seconds})  # fmt: skip
            cases.append(case)
            new = case.get("new", {})
            print(f"{shape:9} {planted_share:.0%} trial {trial}: confirmed={confirmed} "
                  f"{new.get('first')} {new.get('finding')}" + (f" | {new['headline']}" if shape in REPLACED and new
                                                                  else ""), flush=True)  # fmt: skip
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
              f"{share(rows, 'adds_up')}; short report adds up {share(rows, 'shown_adds_up')}; "
              f"profiling s per regression median {statistics.median(seconds):.2f} max {max(seconds):.2f}")  # fmt: skip
    for shape in [*PLANTS, *REPLACED]:
        rows = [c for c in planted if c["shape"] == shape]
        for label in ("new", "old") if rows else ():
            scored = [c[label] for c in rows if label in c]
            if not scored:
                continue
            extra = (f"; removed fused op shown {share(scored, 'removed_shown')}; headline names it "
                     f"{share(scored, 'headline_right')}" if shape in REPLACED else "")  # fmt: skip
            print(f"  {shape:18} {label}: first row right {share(scored, 'first_right')}{extra}")
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", choices=("cpu", "replaced", "cuda", "all"), default="all",
                        help="the CPU study (planted shapes and replacements), its replacements alone, the CUDA "
                        "cases (skipped without CUDA), or all")  # fmt: skip
    parser.add_argument("--trials", type=int, default=4, help="trials per CPU workload and share")
    parser.add_argument("--cuda-trials", type=int, default=CUDA_TRIALS, help="trials per CUDA case")
    parser.add_argument("--shares", default="0.03,0.05")
    parser.add_argument("--old-rev", default=None, help="a revision whose why pipeline to score beside today's")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--old-worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.old_worker is not None:
        old_worker(args.old_worker)
        return 0
    cpu = run_cpu(args) if args.cases != "cuda" else None

    def save(cuda: dict[str, Any] | None) -> None:
        if args.json:
            args.json.write_text(json.dumps({"cpu": cpu, "cuda": cuda}, indent=1))

    status = 0
    if args.cases in ("cpu", "replaced"):
        save(None)
    else:
        cases, figure = run_cuda(args.cuda_trials, lambda so_far: save({"figure": None, "cases": so_far}))
        print(f"figure: {figure}")
        save({"figure": figure, "cases": cases})
        status = int(any(verdict(c) == "FAILED" for c in cases))
    return status


if __name__ == "__main__":
    sys.exit(main())
