"""How faithful are pytest-gpuperf's GPU timings? Compare them with two independent references.

For a memory-bound copy and bf16 matmuls (up to 8192^3) it measures each
workload three ways and prints one table:

* the plugin's runner (``Runner.measure``: CUDA events, warm-up, adaptive
  stopping) - the number a test's baseline would hold;
* the CUPTI kernel time from ``torch.profiler`` for the very same calls the
  runner timed (the runner runs under the profiler): only the kernels' own
  execution, no launch gaps, and the same clocks and power state;
* ``triton.testing.do_bench`` (median) - the de-facto reference of kernel
  authors; it flushes L2 before every call, the runner here does not.

It also compares the runner's per-call time in eager mode with CUDA-graph
mode (``cuda_graph=True``) for a tiny, launch-bound kernel. Rates (TB/s for
the copy, counting the read and the write; TFLOP/s as 2*m*n*k) come from the
measured times only; nothing is compared with a datasheet.

Run on a GPU machine::

    python benchmarks/gpu_fidelity.py                    # the full set, about a minute
    python benchmarks/gpu_fidelity.py --json out.json    # also keep the numbers

``--device cpu`` runs the same pipeline on the CPU with tiny sizes as a smoke
test of the script (no do_bench, no graphs); its numbers say nothing about GPUs.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.gpu.device import cuda_synchronize, resolve_device
from pytest_gpuperf.gpu.nvml import probe_device
from pytest_gpuperf.measure.runner import MeasureSpec, Runner, RunnerOptions
from pytest_gpuperf.model import Measurement

MIB = 1024 * 1024
PROFILED_CALLS = 10
# One tiny add is the purest launch-overhead case; a chain of them is where graphs pay off,
# since a replay launches the whole chain at the cost of about one launch.
TINY_CHAINS = (1, 20)


@dataclass
class Row:
    """One workload measured every way; times in milliseconds, None where not measured."""

    case: str
    runner_ms: float | None
    kernel_ms: float | None
    do_bench_ms: float | None
    work: float  # bytes moved or flops per call
    unit: str  # "TB/s" or "TFLOP/s"
    precision: float | None = None
    note: str = ""

    def rate(self, ms: float | None) -> float | None:
        if ms is None or ms <= 0:
            return None
        return self.work / (ms / 1e3) / 1e12


def runner_measurement(
    fn: Callable[[], object], device: torch.device, settings: MeasureSettings, name: str, *, head_start: bool = True
) -> Measurement:
    runner = Runner(RunnerOptions(device=device, nvtx=False, head_start=head_start))
    return runner.measure(MeasureSpec(fn=fn, test_id="gpu_fidelity", name=name, settings=settings))


def profiler_time_ms(fn: Callable[[], object], device: torch.device, calls: int = PROFILED_CALLS) -> float:
    """Kernel time per call as CUPTI reports it (self CPU time of the operators on the CPU)."""
    from torch.profiler import ProfilerActivity, profile

    on_cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if on_cuda else [ProfilerActivity.CPU]
    fn()
    cuda_synchronize(device)
    with profile(activities=activities) as prof:
        for _ in range(calls):
            fn()
        cuda_synchronize(device)
    events = prof.key_averages()
    if on_cuda:
        cuda = torch.autograd.DeviceType.CUDA
        total_us = sum(e.self_device_time_total for e in events if e.device_type == cuda)
    else:
        total_us = sum(e.self_cpu_time_total for e in events)
    return float(total_us) / 1e3 / calls


def do_bench_ms(fn: Callable[[], object], device: torch.device) -> tuple[float | None, str]:
    if device.type != "cuda":
        return None, "do_bench needs CUDA"
    try:
        from triton.testing import do_bench
    except ImportError as exc:
        return None, f"triton not importable ({exc})"
    try:
        return float(do_bench(fn, warmup=25, rep=100, return_mode="median")), ""
    except TypeError:  # triton before return_mode: ask for the 0.5 quantile instead
        return float(do_bench(fn, warmup=25, rep=100, quantiles=[0.5])[0]), ""


def profiled_runner(
    fn: Callable[[], object], device: torch.device, settings: MeasureSettings, name: str
) -> tuple[Measurement, float | None]:
    """The runner's measurement and, for the very same calls, the CUPTI kernel time per call.

    A call may launch more than one kernel (cuBLAS adds a split-K reduction for some
    shapes): the kernels launched once per call are those as frequent as the most
    frequent one, and the per-call time is the sum of their median durations. The
    runner's own sleep kernels (its head start) are left out. On the CPU there is no
    kernel: the second value is None.
    """
    from torch.profiler import ProfilerActivity, profile

    if device.type != "cuda":
        return runner_measurement(fn, device, settings, name), None
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        m = runner_measurement(fn, device, settings, name)
        cuda_synchronize(device)
    durations: dict[str, list[float]] = {}
    for event in prof.events():
        harness = any(word in event.name.lower() for word in ("spin_kernel", "sleep"))
        if event.device_type == torch.autograd.DeviceType.CUDA and not harness:
            durations.setdefault(event.name, []).append(event.time_range.elapsed_us())
    if not durations:
        return m, None
    most = max(len(d) for d in durations.values())
    per_call = [d for d in durations.values() if len(d) >= 0.9 * most]
    return m, sum(statistics.median(d) for d in per_call) / 1e3


def measure_case(
    case: str,
    fn: Callable[[], object],
    device: torch.device,
    settings: MeasureSettings,
    *,
    work: float,
    unit: str,
) -> Row:
    m, kernel = profiled_runner(fn, device, settings, case)
    if kernel is None:
        kernel = profiler_time_ms(fn, device)
    bench, bench_note = do_bench_ms(fn, device)
    notes = [n for n in (m.unstable_reason, bench_note) if n]
    return Row(
        case=case,
        runner_ms=m.stats.median_ns / 1e6,
        kernel_ms=kernel,
        do_bench_ms=bench,
        work=work,
        unit=unit,
        precision=m.precision,
        note="; ".join(notes),
    )


def copy_case(device: torch.device, mib: int, settings: MeasureSettings) -> Row:
    src = torch.ones(mib * MIB // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    nbytes = 2.0 * src.numel() * src.element_size()  # read once, write once
    return measure_case(f"copy {mib} MiB", lambda: dst.copy_(src), device, settings, work=nbytes, unit="TB/s")


def matmul_case(device: torch.device, n: int, settings: MeasureSettings) -> Row:
    dtype = torch.bfloat16
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    return measure_case(
        f"bf16 mm {n}^3",
        lambda: torch.mm(a, b, out=out),
        device,
        settings,
        work=2.0 * n**3,
        unit="TFLOP/s",
    )


def graph_vs_eager(device: torch.device, settings: MeasureSettings, chain: int) -> tuple[Row, Row, Row]:
    """The runner's per-call time of ``chain`` in-place adds on one element, eager and graphed."""
    x = torch.zeros(1, device=device)

    def tiny() -> torch.Tensor:
        for _ in range(chain):
            x.add_(1)
        return x

    eager = runner_measurement(tiny, device, settings, f"tiny x{chain} eager")
    graph_settings = MeasureSettings(**{**asdict(settings), "cuda_graph": True})
    graphed = runner_measurement(tiny, device, graph_settings, f"tiny x{chain} graph")
    # The same eager calls without the head start, to show what it changes for launch-bound code.
    bare = runner_measurement(tiny, device, settings, f"tiny x{chain} eager bare", head_start=False)
    kernel = profiler_time_ms(tiny, device)

    def row(label: str, m: Measurement) -> Row:
        return Row(
            case=f"{chain} tiny add(s), {label}",
            runner_ms=m.stats.median_ns / 1e6,
            kernel_ms=kernel,
            do_bench_ms=None,
            work=0.0,
            unit="",
            precision=m.precision,
            note=m.unstable_reason or "",
        )

    return row("eager", eager), row("CUDA graph", graphed), row("eager, no head start", bare)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.2f} us"


def format_table(rows: Sequence[Row]) -> list[str]:
    header = (
        "case",
        "runner p50",
        "CI +/-",
        "CUPTI kernel",
        "do_bench p50",
        "runner/kernel",
        "rate runner",
        "rate kernel",
        "notes",
    )
    body: list[tuple[str, ...]] = []
    for r in rows:
        ratio = r.runner_ms / r.kernel_ms if r.runner_ms is not None and r.kernel_ms else None
        body.append(
            (
                r.case,
                _us(r.runner_ms),
                _fmt(r.precision, ".2%"),
                _us(r.kernel_ms),
                _us(r.do_bench_ms),
                _fmt(ratio, ".3f"),
                f"{_fmt(r.rate(r.runner_ms), '.3g')} {r.unit}" if r.unit else "",
                f"{_fmt(r.rate(r.kernel_ms), '.3g')} {r.unit}" if r.unit else "",
                r.note,
            )
        )
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in (header, *body)]
    lines.insert(1, "-" * len(lines[0]))
    return lines


def environment(device: torch.device) -> dict[str, Any]:
    env: dict[str, Any] = {"device": str(device), "torch": torch.__version__, "python": platform.python_version()}
    if device.type == "cuda":
        index = device.index or 0
        env["gpu"] = torch.cuda.get_device_name(index)
        env["cuda"] = torch.version.cuda
        env["nvml"] = probe_device(index)
    return env


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--device", default="cuda", help='"cuda", "cuda:N" or "cpu" (a smoke run of the script)')
    p.add_argument("--sizes", default=None, help="matmul sizes, comma separated (default 2048,4096,8192)")
    p.add_argument("--copy-mib", default=None, help="MiB copied per call, comma separated (default 64,1024)")
    p.add_argument("--max-time", type=float, default=3.0, help="runner time budget per case, seconds")
    p.add_argument("--json", dest="json_path", default=None, help="also write environment and rows here")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        device = resolve_device(args.device)
    except Exception as exc:
        print(f"gpu_fidelity: {exc}", file=sys.stderr)
        return 2
    on_cuda = device.type == "cuda"
    sizes = [int(s) for s in (args.sizes or ("2048,4096,8192" if on_cuda else "64,128")).split(",")]
    copy_mibs = [int(s) for s in (args.copy_mib or ("64,1024" if on_cuda else "4")).split(",")]
    settings = MeasureSettings(
        warmup_time_s=min(0.5, args.max_time / 4),
        min_time_s=min(1.0, args.max_time / 2),
        max_time_s=args.max_time,
        target_precision=0.005,
    )
    env = environment(device)
    print(json.dumps(env, indent=2))

    rows = [copy_case(device, mib, settings) for mib in copy_mibs]
    rows.extend(matmul_case(device, n, settings) for n in sizes)
    pairs = [graph_vs_eager(device, settings, chain) for chain in TINY_CHAINS] if on_cuda else []
    for pair in pairs:
        rows.extend(pair)
    print()
    print("\n".join(format_table(rows)))
    for eager, graph, _ in pairs:
        if eager.runner_ms and graph.runner_ms:
            print(f"{eager.case.split(',')[0]}: CUDA graph replay {eager.runner_ms / graph.runner_ms:.2f}x eager speed")
    if not on_cuda:
        print("\n(CPU smoke run: 'CUPTI kernel' is the profiler's self CPU time; no do_bench, no graphs)")
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump({"environment": env, "rows": [asdict(r) for r in rows]}, fh, indent=2)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
