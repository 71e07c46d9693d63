"""Record real run-to-run noise for the history detection benchmark.

    python benchmarks/history_noise_record.py --sessions 40 --out benchmarks/results/history_noise.json

It copies ``scripts/demo_project`` (two torch CPU tests: a matmul and an MLP
inference step) to a temporary folder and runs ``pytest --gpuperf
--gpuperf-json`` on it ``--sessions`` times in a row, each a separate process on
unchanged code. From each results file it keeps, per test, what the history
store records of a run: the median (``stats.median_ns``), the run's own
relative precision (``precision``: half-width of the median's 95% interval),
the sample count and the per-process medians. Nothing else is kept, so the file
stays small. ``benchmarks/history_detection.py`` draws its synthetic series'
noise from these sessions: the relative deviation of each session's median
from the test's median over all sessions (the between-run noise), paired with
that session's reported precision.

``--load N`` runs the sessions beside N synthetic noisy neighbours
(``benchmarks/background_load.py``): a busy runner, whose runs scatter more
and whose own precision says so; the benchmark mixes a share of such runs in.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from _common import RESULTS, ROOT
from background_load import BackgroundLoad


def _session(project: Path, index: int, out_dir: Path) -> dict[str, dict[str, object]]:
    results = out_dir / f"session-{index:03d}.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--gpuperf"]
    if index == 0:
        args.append("--gpuperf-update-baseline")
    proc = subprocess.run(
        [*args, "--gpuperf-json", str(results)], cwd=project, env=env, capture_output=True, text=True, check=False
    )
    if not results.exists():
        raise SystemExit(f"session {index} wrote no results file:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    data = json.loads(results.read_text())
    kept: dict[str, dict[str, object]] = {}
    for result in data["results"]:
        m = result["measurement"]
        kept[result["key"]] = {
            "median_ns": m["stats"]["median_ns"],
            "precision": m["precision"],
            "samples": m["stats"]["count"],
            "process_medians_ns": m["process_medians_ns"],
        }
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--out", type=Path, default=RESULTS / "history_noise.json")
    parser.add_argument("--load", type=int, default=0, help="noisy neighbour processes during the sessions")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuperf-noise-") as tmp, BackgroundLoad(args.load, seed=7):
        project = Path(tmp) / "project"
        shutil.copytree(ROOT / "scripts/demo_project", project)
        sessions = []
        for index in range(args.sessions):
            sessions.append(_session(project, index, Path(tmp)))
            print(f"session {index + 1}/{args.sessions}", flush=True)
    tests: dict[str, list[dict[str, object]]] = {}
    for session in sessions:
        for key, run in session.items():
            tests.setdefault(key, []).append(run)
    for key, runs in tests.items():
        medians = [float(r["median_ns"]) for r in runs]  # type: ignore[arg-type]
        centre = statistics.median(medians)
        spread = statistics.median(abs(m / centre - 1) for m in medians) * 1.4826
        print(f"{key}: {len(runs)} runs, between-run robust sd {spread:.2%}")
    args.out.write_text(
        json.dumps(
            {
                "origin": "benchmarks/history_noise_record.py on scripts/demo_project, unchanged code",
                "background_load": args.load,
                "recorded": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "machine": {
                    "platform": platform.platform(),
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                },
                "tests": tests,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
