"""Three end-to-end checks of benchmarks/gpu_session.sh, each a real pytest run of a generated test file.

    python benchmarks/gpu_checks.py machine --out DIR       # torch, CUDA, triton; the plugin's NVML probe
    python benchmarks/gpu_checks.py compare_ref --out DIR   # compare-ref on CUDA: unchanged passes, +5% caught
    python benchmarks/gpu_checks.py benchmark --out DIR     # the `benchmark` fixture, one function syncing itself
    python benchmarks/gpu_checks.py history --out DIR       # a run recorded into SQLite; its stored environment
    python benchmarks/gpu_checks.py device_state --out DIR  # clocks and power per sample, energy per call vs NVML
    python benchmarks/gpu_checks.py fidelity --json F --out DIR  # gpu_fidelity.py's JSON: large kernels within 1.5%

Each prints its figure as the last line (``figure: ...``), leaves its pytest log and results in
DIR, and exits 0 when the check holds, 1 when it does not. ``--device cpu`` runs the same check on
the CPU (a smoke test of this script; compare-ref then needs a larger ``--head-reps`` to be seen
through CPU noise).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

# Fidelity: a kernel of at least LARGE_KERNEL_MS per call is "large": the 1-3 us gap the GPU leaves
# between back-to-back kernels (which CUPTI leaves out and events include) is under 0.6% of it.
LARGE_KERNEL_MS = 0.5
LARGE_TOLERANCE = 0.015

# Device state: what NVML may plausibly read beside a sample, and how close the energy per call must come to
# NVML's own counter read around a loop of the same calls (issue 54).
PLAUSIBLE_SM_MHZ = (100.0, 4000.0)
PLAUSIBLE_TEMPERATURE_C = (0.0, 120.0)
ENERGY_TOLERANCE = 0.10

# Errors a CUDA context in a forked worker would show (torch's own messages).
FORK_ERRORS = ("Cannot re-initialize CUDA in forked subprocess", "CUDA error", "CUDA driver error")

CHAIN = """
import torch

DEVICE = "{device}"
DTYPE = torch.bfloat16 if DEVICE.startswith("cuda") else torch.float32
A = torch.randn({n}, {n}, device=DEVICE, dtype=DTYPE) / {n} ** 0.5

def chain(reps):
    x = A
    for _ in range(reps):
        x = x @ A
    return x

def test_slowed(gpu_bench):
    gpu_bench(chain, {reps})

def test_unchanged(gpu_bench):
    gpu_bench(chain, {base_reps})
"""

BENCHMARK = """
import torch

DEVICE = "{device}"
DTYPE = torch.bfloat16 if DEVICE.startswith("cuda") else torch.float32
A = torch.randn({n}, {n}, device=DEVICE, dtype=DTYPE) / {n} ** 0.5
SYNC = torch.cuda.synchronize if DEVICE.startswith("cuda") else (lambda: None)

def product():
    return A @ A

def product_synced():
    out = A @ A
    SYNC()  # the host waits for the kernel inside the timed call, as pytest-benchmark users write it
    return out

def test_plain(benchmark):
    assert benchmark(product).shape == A.shape

def test_synced(benchmark):
    assert benchmark(product_synced).shape == A.shape
"""


DEVICE_STATE = """
import json, os, time

import torch

DEVICE = "{device}"
DTYPE = torch.bfloat16 if DEVICE.startswith("cuda") else torch.float32
A = torch.randn({n}, {n}, device=DEVICE, dtype=DTYPE) / {n} ** 0.5
SYNC = torch.cuda.synchronize if DEVICE.startswith("cuda") else (lambda: None)


def product():
    return A @ A


def counter():
    # NVML's total-energy counter of this GPU in mJ, read as the plugin reads it; None without one
    if not DEVICE.startswith("cuda"):
        return None
    from pytest_gpuperf.gpu.nvml import NvmlQueryError, PynvmlBackend

    api = PynvmlBackend()
    try:
        api.init()
        return api.total_energy_mj(api.device_handle(torch.device(DEVICE).index or 0))
    except NvmlQueryError:
        return None


def test_energy(gpu_bench):
    before = counter()
    m = gpu_bench.measure(product, energy=True)
    after = counter()
    # the reference: the counter read around a loop of the same call, the device busy throughout
    SYNC()
    start, t0, calls = counter(), time.perf_counter(), 0
    while time.perf_counter() - t0 < {seconds}:
        for _ in range(10):
            product()
        calls += 10
        SYNC()
    end, seconds = counter(), time.perf_counter() - t0
    both = lambda a, b: None if a is None or b is None else b - a
    reference = {{"loop_calls": calls, "loop_s": seconds, "loop_mj": both(start, end),
                  "measurement_mj": both(before, after), "measurement_calls": m.warmup_calls + m.total_calls}}
    with open(os.environ["GPUPERF_ENERGY_REFERENCE"], "w") as out:
        json.dump(reference, out)
"""


def pytest_run(
    root: Path, out: Path, name: str, *args: str, timeout: float, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """``python -m pytest ARGS`` in ``root``, ``env`` added to the environment; its output saved as ``out/NAME.log``."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE", *args]
    try:
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, **(env or {})})  # fmt: skip
        rc, log = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as stopped:  # keep what it printed: the log says how far it got
        rc, log = 124, f"{_text(stopped.stdout)}{_text(stopped.stderr)}\nstopped at its limit of {timeout:.0f}s"
    (out / f"{name}.log").write_text(f"$ {' '.join(cmd)}\n{log}")
    return rc, log


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def measurements(results: Path) -> dict[str, dict]:
    """``test name -> result`` of a ``--gpuperf-json`` file."""
    return {r["key"].split("::")[1]: r for r in json.loads(results.read_text())["results"]}


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def compare_ref(args: argparse.Namespace, work: Path) -> tuple[bool, str]:
    """Base: both tests run a chain of ``base_reps`` matmuls; head: one test runs ``head_reps`` (default +5%)."""
    if shutil.which("git") is None:
        return False, "compare-ref needs git, and there is none on PATH"
    _git(work, "init", "-q")
    _git(work, "config", "user.email", "gpu@example.com")
    _git(work, "config", "user.name", "gpu")
    (work / "pytest.ini").write_text("[pytest]\n")
    source = {"device": args.device, "n": args.n or 2048, "base_reps": args.base_reps}
    (work / "test_perf.py").write_text(CHAIN.format(reps=args.base_reps, **source))
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "base")
    (work / "test_perf.py").write_text(CHAIN.format(reps=args.head_reps, **source))
    _git(work, "commit", "-qam", "head: a longer chain")
    results = args.out / "compare_ref.json"
    rc, log = pytest_run(work, args.out, "compare_ref_pytest", "--gpuperf", "--gpuperf-compare-ref=HEAD~1",
                         f"--gpuperf-device={args.device}", f"--gpuperf-threshold={args.threshold}",
                         f"--gpuperf-max-time={args.max_time}", "--gpuperf-confirm-pairs=3",
                         f"--gpuperf-json={results}", timeout=args.timeout)  # fmt: skip
    if not results.exists():
        return False, f"compare-ref wrote no results (pytest exit {rc}): {log.strip().splitlines()[-1:]}"
    found = {name: r["comparisons"][0] for name, r in measurements(results).items()}
    slowed, unchanged = found["test_slowed"], found["test_unchanged"]
    fork_errors = [e for e in FORK_ERRORS if e in log]
    planted = args.head_reps / args.base_reps - 1
    figure = (f"compare-ref on {args.device}: planted +{planted:.1%} read {slowed['change']:+.2%} "
              f"({slowed['verdict']}, {'confirmed' if 'confirmed by' in slowed.get('note', '') else 'not confirmed'}); "
              f"unchanged {unchanged['change']:+.2%} ({unchanged['verdict']}); "
              f"fork errors: {', '.join(fork_errors) or 'none'}")  # fmt: skip
    ok = (rc == 1 and slowed["verdict"] == "regression" and "confirmed by" in slowed.get("note", "")
          and unchanged["verdict"] != "regression" and not fork_errors)  # fmt: skip
    return ok, figure


def benchmark(args: argparse.Namespace, work: Path) -> tuple[bool, str]:
    """The ``benchmark`` fixture under ``--gpuperf``: both functions measured, the synced one not faster."""
    (work / "test_bench.py").write_text(BENCHMARK.format(device=args.device, n=args.n or 8192))
    results = args.out / "benchmark.json"
    rc, log = pytest_run(work, args.out, "benchmark_pytest", "--gpuperf", f"--gpuperf-device={args.device}",
                         f"--gpuperf-max-time={args.max_time}", f"--gpuperf-json={results}",
                         timeout=args.timeout)  # fmt: skip
    if rc != 0 or not results.exists():
        return False, f"benchmark fixture run failed (pytest exit {rc}): {log.strip().splitlines()[-1:]}"
    found = measurements(results)
    us = {name: found[name]["measurement"]["stats"]["median_ns"] / 1e3 for name in ("test_plain", "test_synced")}
    devices = {found[name]["measurement"]["device"] for name in us}
    ratio = us["test_synced"] / us["test_plain"]
    # A synchronize inside the call adds the host's wait, never removes kernel time: the synced
    # function reads at least the plain one, and for a large kernel not much more.
    kind = args.device.split(":")[0]
    ok = all(str(d).startswith(kind) for d in devices) and args.min_ratio <= ratio <= args.max_ratio
    figure = (f"benchmark fixture on {'/'.join(sorted(devices))}: plain {us['test_plain']:.1f} us, "
              f"synchronize() inside {us['test_synced']:.1f} us (x{ratio:.3f})")  # fmt: skip
    return ok, figure


def history(args: argparse.Namespace, work: Path) -> tuple[bool, str]:
    """One session recorded into a fresh SQLite store; the stored run's environment saved as history_env.json."""
    (work / "test_bench.py").write_text(BENCHMARK.format(device=args.device, n=args.n or 8192))
    store = args.out / "history.sqlite"
    store.unlink(missing_ok=True)
    rc, log = pytest_run(work, args.out, "history_pytest", "--gpuperf", f"--gpuperf-device={args.device}",
                         f"--gpuperf-max-time={args.max_time}", f"--gpuperf-history=sqlite:///{store}",
                         "-k", "test_plain", timeout=args.timeout)  # fmt: skip
    if rc != 0 or not store.exists():
        return False, f"history run failed (pytest exit {rc}): {log.strip().splitlines()[-1:]}"
    with sqlite3.connect(store) as db:
        runs = db.execute("SELECT run_id, device_class, environment FROM gpuperf_runs").fetchall()
        values = db.execute("SELECT count(*) FROM gpuperf_values").fetchone()[0]
    if len(runs) != 1:
        return False, f"history: {len(runs)} runs stored, expected 1"
    run_id, device_class, env_text = runs[0]
    env = json.loads(env_text)
    (args.out / "history_env.json").write_text(json.dumps({"device_class": device_class, "environment": env}, indent=2))
    fields = {k: env.get(k) for k in ("device_type", "gpu_model", "gpu_count", "driver", "cuda", "torch")}
    on_gpu = args.device.startswith("cuda")
    complete = all(fields[k] not in (None, "") for k in fields) if on_gpu else fields["gpu_count"] == 0
    ok = values > 0 and complete and fields["device_type"] == args.device.split(":")[0]
    shown = ", ".join(f"{k}={v}" for k, v in fields.items())
    return ok, f"history: run {run_id[:12]} with {values} values in {device_class}; stored {shown}"


def device_state(args: argparse.Namespace, work: Path) -> tuple[bool, str]:
    """A large matmul measured with ``energy=True``: clock, power and temperature beside every sample and plausible,
    the energy per call within 10% of NVML's counter read around a loop of the same call, both kept in the history
    and drawn in the HTML report. On the CPU: nothing read, and the energy said not measured."""
    (work / "test_energy.py").write_text(DEVICE_STATE.format(device=args.device, n=args.n or 8192,
                                                             seconds=args.reference_s))  # fmt: skip
    results, page, store = args.out / "device_state.json", args.out / "device_state.html", args.out / "device.sqlite"
    reference_file = args.out / "energy_reference.json"
    store.unlink(missing_ok=True)
    rc, log = pytest_run(work, args.out, "device_state_pytest", "--gpuperf", f"--gpuperf-device={args.device}",
                         f"--gpuperf-max-time={args.max_time}", f"--gpuperf-json={results}", f"--gpuperf-html={page}",
                         f"--gpuperf-history=sqlite:///{store}", timeout=args.timeout,
                         env={"GPUPERF_ENERGY_REFERENCE": str(reference_file)})  # fmt: skip
    if rc != 0 or not results.exists() or not reference_file.exists():
        return False, f"device state run failed (pytest exit {rc}): {log.strip().splitlines()[-1:]}"
    (result,) = json.loads(results.read_text())["results"]
    m = result["measurement"]
    with sqlite3.connect(store) as db:
        stored = {row[0] for row in db.execute("SELECT statistic FROM gpuperf_values")}
    drawn = '<figure class="device">' in page.read_text()
    energy = next((x for x in m["metrics"] if x["name"] == "energy"), None)
    state = m["device_state"]
    if not args.device.startswith("cuda"):
        said = any(n["text"].startswith("energy requested but not measured") for n in m["notes"])
        return state is None and energy is None and said, f"device state on cpu: none read, energy not measured " \
            f"({'said so' if said else 'NOT said'})"  # fmt: skip
    if state is None:
        return False, f"device state on {args.device}: none recorded; notes: {[n['text'] for n in m['notes']]}"
    return _judge_device_state(m, state, energy, json.loads(reference_file.read_text()), stored, drawn)


def _span(values: list[float]) -> str:
    return f"{min(values):.0f}-{max(values):.0f}" if values else "not read"


def _judge_device_state(m: dict, state: dict, energy: dict | None, reference: dict, stored: set[str],
                        drawn: bool) -> tuple[bool, str]:  # fmt: skip
    """Whether what NVML read beside the samples is complete and plausible, and the energy per call matches the
    counter's reference; the figure line says what was read."""
    from pytest_gpuperf.gpu.nvml import decode_reasons

    n = len(m["samples_ns"])
    sm, power, temperature = state["sm_clock_mhz"], state["power_w"], state["temperature_c"]
    complete = all(len(v) == n for v in (sm, power, temperature, state["reasons"]))
    low, high = PLAUSIBLE_TEMPERATURE_C
    plausible = (all(PLAUSIBLE_SM_MHZ[0] <= v <= PLAUSIBLE_SM_MHZ[1] for v in sm) and all(v > 0 for v in power)
                 and all(low <= v <= high for v in temperature))  # fmt: skip
    seen = 0
    for r in state["reasons"]:
        seen |= r
    facts = (f"{n} samples, {state['readings']} NVML readings at {state['reading_ns'] / 1e3:.0f} us each; SM clock "
             f"{_span(sm)} MHz (median {state['summary']['sm_clock_mhz']}), power {_span(power)} W, temperature "
             f"{_span(temperature)} C; reasons seen: {', '.join(decode_reasons(seen)) or 'none'}")  # fmt: skip
    per_call_j = (reference["loop_mj"] / 1e3 / reference["loop_calls"]) if reference["loop_mj"] else None
    whole_j = (reference["measurement_mj"] / 1e3 / reference["measurement_calls"]) if reference["measurement_mj"] \
        else None  # fmt: skip
    kept = {"device.sm_clock", "device.power", "metric.energy"} <= stored
    if energy is None or per_call_j is None:
        counter = "read" if per_call_j is not None else "not readable"
        return False, (f"{facts}; energy per call {'not measured' if energy is None else 'measured'}, NVML counter "
                       f"{counter}; history {'kept' if kept else 'NOT kept'} it")  # fmt: skip
    off = energy["value"] / per_call_j - 1
    power_j = sum(p * t / 1e9 for p, t in zip(power, m["samples_ns"], strict=True)) / n if power else None
    figure = (f"{facts}; energy per call {energy['value']:.4g} J ({state['energy_source']}) vs {per_call_j:.4g} J by "
              f"the counter around {reference['loop_calls']} calls ({off:+.1%}, "
              f"{'within' if abs(off) <= ENERGY_TOLERANCE else 'OUTSIDE'} {ENERGY_TOLERANCE:.0%}); power readings x "
              f"time {power_j:.4g} J; counter around the whole measurement {whole_j or float('nan'):.4g} J per call "
              f"(warm-up and the gaps between rounds included); history {'kept' if kept else 'NOT kept'} it, "
              f"HTML {'drew' if drawn else 'did NOT draw'} it")  # fmt: skip
    return complete and plausible and abs(off) <= ENERGY_TOLERANCE and kept and drawn, figure


def machine(args: argparse.Namespace, work: Path) -> tuple[bool, str]:
    """The versions and the NVML probe as the plugin records them (machine.json); ok when NVML answered."""
    import torch

    from pytest_gpuperf.gpu.nvml import probe_device

    index = (torch.device(args.device).index or 0) if args.device.startswith("cuda") else None
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
                "git": "found" if shutil.which("git") else "not found (compare-ref cannot run)"}  # fmt: skip
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = "not installed"
    probe = probe_device(index) if index is not None else {"nvml": "not probed on the CPU"}
    (args.out / "machine.json").write_text(json.dumps({"versions": versions, "nvml": probe}, indent=2))
    print(json.dumps(probe, indent=2))
    gpu = torch.cuda.get_device_name(index) if index is not None else "cpu"
    clocks = (
        f"CUDA driver {probe.get('cuda_driver_version', '?')}, SM clock max {probe.get('sm_max_clock_mhz', '?')} "
        f"MHz, power limit {probe.get('power_limit_w', '?')} W, clocks locked: {probe.get('clocks_locked', '?')}"
    )
    shown = ", ".join(f"{k} {v}" for k, v in versions.items())
    driver = probe.get("driver", probe.get("nvml"))
    return index is None or "driver" in probe, f"{gpu}, driver {driver}, {clocks}; {shown}"


def fidelity(args: argparse.Namespace, work: Path) -> tuple[bool, str]:
    """The runner/kernel ratios of a gpu_fidelity.py JSON file: large kernels within 1.5%, the rest stated."""
    if args.json is None or not args.json.exists():
        return False, f"fidelity: no results file {args.json}"
    rows = [r for r in json.loads(args.json.read_text())["rows"] if r["runner_ms"] and r["kernel_ms"]]
    ratios = {r["case"]: r["runner_ms"] / r["kernel_ms"] for r in rows if "tiny" not in r["case"]}
    large = {c: q for c, q in ratios.items() if next(r for r in rows if r["case"] == c)["kernel_ms"] >= LARGE_KERNEL_MS}
    outside = [c for c, q in large.items() if abs(q - 1) > LARGE_TOLERANCE]
    shown = "; ".join(f"{c} {q:.3f}" for c, q in large.items())
    small = "; ".join(f"{c} {q:.3f}" for c, q in ratios.items() if c not in large)
    ok = bool(large) and not outside
    verdict = f"outside {LARGE_TOLERANCE:.1%}: {', '.join(outside)}" if outside else f"within {LARGE_TOLERANCE:.1%}"
    return ok, (f"runner/kernel, large (>= {LARGE_KERNEL_MS} ms): {shown or 'none measured'} ({verdict}); "
                f"small: {small or 'none'}")  # fmt: skip


CHECKS = {
    "machine": machine,
    "compare_ref": compare_ref,
    "benchmark": benchmark,
    "history": history,
    "device_state": device_state,
    "fidelity": fidelity,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("check", choices=sorted(CHECKS))
    p.add_argument("--out", type=Path, required=True, help="folder for the logs and results")
    p.add_argument("--device", default="cuda", help='"cuda", "cuda:N" or "cpu" (a smoke run)')
    p.add_argument("--n", type=int, default=None,
                   help="matrix size (default: compare_ref 2048, a chain of 20 such matmuls is about 0.5 ms on an "
                        "H100; benchmark, history and device_state 8192, one matmul of about 1.5 ms, so a "
                        "synchronize's wake-up is a small part of it)")  # fmt: skip
    p.add_argument("--base-reps", type=int, default=20, help="compare_ref: matmuls per call in the base")
    p.add_argument("--head-reps", type=int, default=21, help="compare_ref: in the head's slowed test (21: +5%%)")
    p.add_argument("--threshold", type=float, default=0.03, help="compare_ref: --gpuperf-threshold")
    p.add_argument("--max-time", type=float, default=1.0, help="--gpuperf-max-time per measurement, seconds")
    p.add_argument("--min-ratio", type=float, default=0.97, help="benchmark: synced / plain at least this")
    p.add_argument("--max-ratio", type=float, default=1.5, help="benchmark: synced / plain at most this")
    p.add_argument("--json", type=Path, default=None, help="fidelity: gpu_fidelity.py's --json file")
    p.add_argument("--reference-s", type=float, default=1.5,
                   help="device_state: seconds of the loop NVML's energy counter is read around")  # fmt: skip
    p.add_argument("--timeout", type=float, default=600, help="the pytest run's own limit, seconds")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"gpu-{args.check}-") as tmp:
        ok, figure = CHECKS[args.check](args, Path(tmp))
    print(f"{args.check}: {'ok' if ok else 'FAILED'}")
    print(f"figure: {figure}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
