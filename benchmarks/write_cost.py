"""What writing baselines costs against gating: a pytest-benchmark-style suite of small tests, timed.

The suite (written to a temporary folder) is ``--tests`` tests on pytest-benchmark's
``benchmark`` fixture, from sub-microsecond calls to about 100 us, a few of them
through ``benchmark.pedantic``, like the suites of cattrs or pydantic-core. Run in
order, each a fresh pytest process with the plugin's default settings:

1. plain pytest-benchmark (no ``--gpuperf``), for reference;
2. ``--gpuperf --gpuperf-update-baseline``: baselines written (fresh-process readings,
   waits for quiet windows included);
3. ``--gpuperf``: a gating run against them, nothing changed.

Printed: each run's wall time, its outcome line, and the write / gate ratio (the
target is at most 3). ``--background-load N`` runs N noisy neighbours
(background_load.py) through all three.

    python benchmarks/write_cost.py [--tests 24] [--background-load 0] [--busy-policy retake] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT
from background_load import BackgroundLoad

_WORK = {
    "noop": "lambda: None",
    "sum10": "lambda: sum(range(10))",
    "dict20": "lambda: {i: str(i) for i in range(20)}",
    "sorted200": "lambda: sorted(range(200, 0, -1))",
    "join500": "lambda: ','.join(map(str, range(500)))",
    "sum5000": "lambda: sum(range(5000))",
}


def suite(count: int) -> str:
    lines = ["import pytest", "", f"WORK = {{{', '.join(f'{k!r}: {v}' for k, v in _WORK.items())}}}", ""]
    names = list(_WORK)
    for i in range(count):
        name = names[i % len(names)]
        if i % 4 == 3:  # a quarter through pedantic, as suites do for setup-free fixed rounds
            body = f"    benchmark.pedantic(WORK[{name!r}], rounds=100, iterations=1)"
        else:
            body = f"    benchmark(WORK[{name!r}])"
        lines += [f"def test_{name}_{i}(benchmark):", body, ""]
    return "\n".join(lines)


def run(args: list[str], cwd: Path) -> tuple[float, str, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    wall = time.perf_counter() - started
    summary = next((ln for ln in reversed(done.stdout.splitlines()) if " in " in ln), "").strip("= ")
    return wall, summary, done.returncode


def write_readings(results: Path) -> dict[str, float]:
    """Readings per entry, and the waits for a quiet window, from the write run's results JSON."""
    import re

    measured = [r["measurement"] for r in json.loads(results.read_text())["results"]]
    notes = [n for m in measured for n in m["notes"]]
    waited = sum(float(w) for n in notes for w in re.findall(r"^waited ([0-9.]+)s for the runner", n))
    waited += sum(float(w) for n in notes for w in re.findall(r"stayed busy through ([0-9.]+)s", n))
    # a note of a spent session gives its running total of waiting, which includes the waits above
    spent = [float(w) for n in notes for w in re.findall(r"quiet windows is spent \(([0-9.]+)s\)", n)]
    waited = max(waited, *spent) if spent else waited
    return {"measurements": len(measured), "readings": sum(len(m.get("process_medians_ns") or [1]) for m in measured),
            "waited_s": waited, "busy": sum("measured busy" in n or "is spent" in n for n in notes)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=24)
    parser.add_argument("--background-load", type=int, default=0, metavar="N")
    parser.add_argument("--busy-policy", default="retake", help="gpuperf_busy_policy of the gpuperf runs")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    policy = f"--gpuperf-busy-policy={args.busy_policy}"
    with tempfile.TemporaryDirectory() as tmp, BackgroundLoad(args.background_load):
        project = Path(tmp)
        (project / "test_suite.py").write_text(suite(args.tests))
        (project / "conftest.py").write_text("import torch\ntorch.set_num_threads(1)\n")
        (project / "pytest.ini").write_text("[pytest]\n")
        runs = {}
        write = ["--gpuperf", "--gpuperf-update-baseline", policy, "--gpuperf-json=write.json"]
        gate = ["--gpuperf", policy]
        plan = (("pytest-benchmark", ["--benchmark-disable-gc"]), ("write", write), ("gate", gate))
        for label, extra in plan:
            wall, summary, rc = run(extra, project)
            runs[label] = {"wall_s": round(wall, 2), "summary": summary, "exit": rc}
            print(f"{label:<17} {wall:7.1f} s  exit {rc}  {summary}")
        runs["write"].update(write_readings(project / "write.json"))
        print(
            "write: {readings} readings in {measurements} measurements; {waited_s:.1f} s waited for quiet windows, "
            "{busy} measured busy after waiting".format(**runs["write"])
        )
    ratio = runs["write"]["wall_s"] / runs["gate"]["wall_s"]
    print(f"write / gate: {ratio:.2f} (target: at most 3)")
    print(f"write / plain pytest-benchmark: {runs['write']['wall_s'] / runs['pytest-benchmark']['wall_s']:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"tests": args.tests, "background_load": args.background_load,
                                         "busy_policy": args.busy_policy, "runs": runs,
                                         "write_over_gate": round(ratio, 2)}, indent=1) + "\n")  # fmt: skip
    return 0 if ratio <= 3.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
