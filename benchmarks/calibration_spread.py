"""Does normalizing by the calibration workload narrow the spread of a baseline-mode change?

    python benchmarks/calibration_spread.py --baselines 4 --sessions 3 --json calibration.json

On the detection benchmark's three-test suite (benchmarks/detection.py), it
writes ``--baselines`` baselines with ``--gpuperf-calibrate=on``, each in its
own process, and against each runs ``--sessions`` gating sessions of unchanged
code and as many with 15% more work, alternating. From each session's
``--gpuperf-json`` it reads the raw change of the median and the calibration
time ratio, and prints, per test and level, the spread of the raw change next
to that of the normalized change ``(1 + raw) / calibration_ratio - 1``. The
gate's default (calibration off) was chosen from this table: docs/statistics.md.
It is a benchmark, not a test: CI does not run it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from detection import PYTEST, machine, set_extra, write_suite

LEVELS = (0, 15)


def session(root: Path, store: Path, args: Sequence[str]) -> None:
    proc = subprocess.run([*PYTEST, "-p", "no:benchmark", f"--gpuperf-baseline-dir={store}", *args, "gp"],
                          cwd=root, capture_output=True, text=True)  # fmt: skip
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"pytest {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr}")


def rows_of(results: Path, baseline_no: int, level: int) -> list[dict[str, object]]:
    out = []
    for result in json.loads(results.read_text())["results"]:
        now, then = result["measurement"], result["baseline"]
        raw = now["stats"]["median_ns"] / then["stats"]["median_ns"] - 1.0
        cal = now["calibration_ns"] / then["calibration_ns"]
        out.append({"baseline": baseline_no, "level": level, "test": now["test_id"].split("::")[-1],
                    "raw": raw, "calibration_ratio": cal, "normalized": (1.0 + raw) / cal - 1.0})  # fmt: skip
    return out


def table(rows: Sequence[dict[str, object]]) -> str:
    lines = ["| level | test | sessions | raw change: sd (range) | normalized: sd (range) | calibration ratio range |",
             "|---|---|---|---|---|---|"]  # fmt: skip

    def spread(values: list[float]) -> str:
        return f"{statistics.pstdev(values):.1%} ({min(values):+.1%} .. {max(values):+.1%})"

    for level in sorted({int(str(r["level"])) for r in rows}):
        for test in sorted({str(r["test"]) for r in rows}):
            mine = [r for r in rows if r["level"] == level and r["test"] == test]
            raw = [float(str(r["raw"])) for r in mine]
            norm = [float(str(r["normalized"])) for r in mine]
            cal = [float(str(r["calibration_ratio"])) for r in mine]
            lines.append(f"| {level}% | {test} | {len(mine)} | {spread(raw)} | {spread(norm)} | "
                         f"{min(cal):.3f} .. {max(cal):.3f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--baselines", type=int, default=4, help="baselines, each written in its own process")
    parser.add_argument("--sessions", type=int, default=3, help="gating sessions per level and baseline")
    parser.add_argument("--json", type=Path, default=None, help="write every row here")
    args = parser.parse_args(argv)
    info = machine()
    work = Path(tempfile.mkdtemp(prefix="gpuperf-calibration-"))
    rows: list[dict[str, object]] = []
    try:
        root = work / "suite"
        write_suite(root, 0)
        for b in range(args.baselines):
            store = work / f"baselines-{b}"
            set_extra(root, 0)
            session(root, store, ["--gpuperf-update-baseline", "--gpuperf-calibrate=on"])
            for _ in range(args.sessions):
                for level in LEVELS:
                    set_extra(root, level)
                    results = work / "results.json"
                    session(root, store, ["--gpuperf", "--gpuperf-calibrate=on", f"--gpuperf-json={results}"])
                    rows.extend(rows_of(results, b, level))
            print(f"baseline {b + 1}/{args.baselines} done", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "rows": rows}, indent=1))
    print(f"Machine: {info['cpu']}, {info['cores']} cores, Python {info['python']}, torch {info['torch']}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
