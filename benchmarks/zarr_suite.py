"""The cost of pytest-gpuperf on a real suite of slow calls: zarr 3.1.6's ``tests/benchmarks``.

zarr ships pytest-benchmark tests in its source distribution: ``test_e2e.py`` writes and reads
arrays of a million elements (end-to-end calls of 0.1 to 1.5 s), ``test_indexing.py`` slices and
iterates (calls of 0.1 ms to 2 s). The script takes :data:`SELECTION`, the tests whose calls last
0.1 to 1 s, and runs them unchanged: a copy of the sdist's ``tests/`` with its ``pyproject.toml``,
so its own settings stay (``filterwarnings = error``, ``--strict-config``, ``--strict-markers``,
``--benchmark-disable`` in addopts), against the zarr wheel from PyPI, in a virtual environment
with pytest-benchmark, pytest-asyncio, hypothesis and this checkout, and no torch (a numpy suite
needs none; the script checks). It times, each a fresh pytest process:

1. pytest-benchmark alone (``-p no:gpuperf --benchmark-enable``): what zarr's maintainers run;
2. ``--gpuperf --gpuperf-update-baseline``: baselines written;
3. ``--gpuperf``, nothing changed: every test should pass;

and prints each session's wall time, its ratio to the first (targets: a write at most 3x, a gate
at most 1.5x), the calls' medians as pytest-benchmark measured them, and how many entries were
written while the runner was busy. ``--background-load N`` runs N noisy neighbours
(background_load.py) through all three sessions.

    python benchmarks/zarr_suite.py --cache ~/.cache/gpuperf-zarr [--background-load 2] [--keep]
    python benchmarks/zarr_suite.py --venv PATH --sdist PATH   # an environment and sdist already there

With ``--cache`` the sdist is downloaded (``pip download --no-binary :all:``) and the environment
made there once, then reused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from _common import ROOT, written_busy
from background_load import BackgroundLoad

ZARR = "3.1.6"
# what zarr's tests/conftest.py and tests/benchmarks import, beside zarr's own dependencies
TEST_REQUIREMENTS = ("pytest", "pytest-benchmark", "pytest-asyncio", "hypothesis")
E2E = "tests/benchmarks/test_e2e.py"
INDEXING = "tests/benchmarks/test_indexing.py"


def _e2e(test: str, store: str, chunks: int, shards: str, compression: str) -> str:
    layout = f"Layout(shape=(1000000,), chunks=({chunks},), shards={shards})"
    return f"{E2E}::test_{test}_array[{store}-{layout}-{compression}]"


def _slices(shards: str, index: str, store: str) -> str:
    return f"{INDEXING}::test_slice_indexing[{shards}-({index}, {index}, {index})-{store}]"


# The tests whose calls took 0.1-1.05 s under pytest-benchmark on a 2-vCPU cloud VM: 17 of the 24
# end-to-end tests (not the four of 1.3-1.5 s, chunks of 100 compressed, nor the three of 0.04-0.09 s)
# and the five slower indexing tests.
SELECTION = (
    _e2e("read", "local", 1000, "None", "None"),
    _e2e("read", "memory", 1000, "(1000,)", "None"),
    _e2e("read", "local", 1000, "None", "gzip"),
    _e2e("read", "memory", 1000, "(1000,)", "gzip"),
    _e2e("read", "local", 1000, "(1000,)", "None"),
    _e2e("read", "local", 1000, "(1000,)", "gzip"),
    _e2e("read", "local", 100, "(1000000,)", "None"),
    _e2e("read", "memory", 100, "(1000000,)", "None"),
    _e2e("write", "memory", 1000, "None", "gzip"),
    _e2e("write", "memory", 1000, "(1000,)", "None"),
    _e2e("write", "memory", 1000, "(1000,)", "gzip"),
    _e2e("write", "local", 1000, "None", "None"),
    _e2e("write", "local", 1000, "None", "gzip"),
    _e2e("write", "local", 100, "(1000000,)", "None"),
    _e2e("write", "local", 1000, "(1000,)", "None"),
    _e2e("write", "memory", 100, "(1000000,)", "None"),
    _e2e("write", "local", 1000, "(1000,)", "gzip"),
    _slices("None", "slice(None, None, None)", "memory_get_latency"),
    _slices("None", "slice(0, None, 4)", "memory_get_latency"),
    _slices("None", "slice(10, -10, 4)", "memory_get_latency"),
    _slices("(50, 50, 50)", "slice(None, None, None)", "memory"),
    f"{INDEXING}::test_sharded_morton_indexing[(32, 32, 32)-memory]",
)


def sdist(cache: Path) -> Path:
    """zarr's unpacked source distribution in ``cache``, downloaded from PyPI the first time."""
    source = cache / f"zarr-{ZARR}"
    if not source.is_dir():
        pip = [sys.executable, "-m", "pip", "-q", "download", "--no-deps", "--no-binary", ":all:"]
        subprocess.run([*pip, f"zarr=={ZARR}", "-d", str(cache)], check=True)
        with tarfile.open(cache / f"zarr-{ZARR}.tar.gz") as archive:
            archive.extractall(cache, filter="data")
    return source


def environment(venv: Path) -> Path:
    """A virtual environment with the zarr wheel, its tests' requirements and this checkout (no torch extra)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, f"zarr=={ZARR}", *TEST_REQUIREMENTS], check=True)
        subprocess.run([*pip, "-e", str(ROOT)], check=True)
    return python


def has_torch(python: Path) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    return subprocess.run([str(python), "-c", probe], check=False).returncode == 0


def suite_copy(source: Path, folder: Path) -> None:
    """The sdist's tests and its pyproject.toml (the pytest settings), without its src/: the wheel is tested."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shutil.copytree(source / "tests", folder / "tests")
    shutil.copy2(source / "pyproject.toml", folder / "pyproject.toml")


def session(python: Path, folder: Path, args: list[str], log: Path) -> tuple[int, float]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    env.pop("PYTEST_ADDOPTS", None)
    command = [str(python), "-m", "pytest", "-p", "no:cacheprovider", *args, *SELECTION]
    started = time.perf_counter()
    with log.open("w") as out:
        rc = subprocess.run(command, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    return rc, time.perf_counter() - started


def call_medians(report: Path) -> list[float]:
    return sorted(b["stats"]["median"] for b in json.loads(report.read_text())["benchmarks"])


def verdicts(results: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for result in json.loads(results.read_text())["results"]:
        counts[result["verdict"]] = counts.get(result["verdict"], 0) + 1
    return counts


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help="download the sdist and make the environment here, once")
    parser.add_argument("--venv", type=Path, help="an environment already made (zarr, the test requirements, this)")
    parser.add_argument("--sdist", type=Path, help=f"zarr {ZARR}'s unpacked sdist, already there")
    parser.add_argument("--background-load", type=int, default=0, help="noisy-neighbour processes throughout")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it (default: a folder in the cache)")
    args = parser.parse_args()
    if args.cache is None and (args.venv is None or args.sdist is None):
        parser.error("give --cache, or both --venv and --sdist")
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
    source = args.sdist or sdist(args.cache)
    python = environment(args.venv or args.cache / "venv")
    folder = args.keep or (args.cache or Path(source).parent) / "zarr-suite-run"
    suite_copy(source, folder)
    baselines = folder / "gpuperf-baselines"
    gpuperf = ["--gpuperf", f"--gpuperf-baseline-dir={baselines}"]
    print(f"zarr {ZARR}: {len(SELECTION)} tests of tests/benchmarks, run in {folder}")
    print(f"torch in the environment: {'yes' if has_torch(python) else 'no'}")
    print(f"noisy neighbours (background_load.py): {args.background_load}; load before: {load()}", flush=True)
    with BackgroundLoad(args.background_load):
        plain_rc, plain_s = session(python, folder, ["-p", "no:gpuperf", "--benchmark-enable",
                                                     "--benchmark-json=bench.json"], folder / "plain.log")  # fmt: skip
        medians = call_medians(folder / "bench.json")
        print(f"calls (pytest-benchmark medians): {medians[0]:.3f} s to {medians[-1]:.3f} s", flush=True)
        update_rc, update_s = session(python, folder, [*gpuperf, "--gpuperf-update-baseline"], folder / "update.log")
        busy, entries = written_busy(baselines)
        print(f"entries written busy: {busy} of {entries}", flush=True)
        gate_rc, gate_s = session(python, folder, [*gpuperf, "--gpuperf-json=gate.json"], folder / "gate.log")
    gate_verdicts = verdicts(folder / "gate.json") if (folder / "gate.json").exists() else {}
    print(f"pytest-benchmark session: {plain_s:7.1f} s (exit {plain_rc})")
    print(f"gpuperf update:           {update_s:7.1f} s (exit {update_rc})  {update_s / plain_s:.2f}x  (target 3x)")
    print(f"gpuperf gate:             {gate_s:7.1f} s (exit {gate_rc})  {gate_s / plain_s:.2f}x  (target 1.5x)")
    print(f"gate verdicts: {', '.join(f'{v} {n}' for v, n in sorted(gate_verdicts.items()))}")
    print(f"load after: {load()}; logs in {folder}")
    return 0 if plain_rc == update_rc == gate_rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
