"""Wall time of compare-ref: two versions of pytest-gpuperf, alternated, and pytest-benchmark.

    python benchmarks/ref_wall_ab.py --a /tmp/old-checkout --b /tmp/new-checkout --rounds 20 --json out.json
    python benchmarks/ref_wall_ab.py --a ... --b ... --level 5 --rounds 6   # sessions that confirm a regression

Each round runs, in alternating order, ``pytest --gpuperf --gpuperf-compare-ref=base`` on the
detection benchmark's suite (unchanged, or ``--level`` percent more work at the head, which
each session must confirm as a regression) with version A and with version B of the package
first on ``PYTHONPATH`` (``git archive`` snapshots), then pytest-benchmark's
``--benchmark-compare`` on the same tests. Alternating puts both versions in the same host
phases. A session whose results JSON mentions fresh process pairs had a first-pair suspicion
and paid for its confirmation; medians are given with and without them. A benchmark, not a
test: CI does not run it. Results: docs/detection.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import detection  # the suite and its git repository


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--a", type=Path, required=True, help="folder holding version A's pytest_gpuperf/")
    parser.add_argument("--b", type=Path, required=True, help="folder holding version B's pytest_gpuperf/")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--level", type=int, default=0, help="percent more work at the head (0: unchanged)")
    args = parser.parse_args()
    detection.LEVELS = tuple(sorted({0, args.level}))
    work = Path(tempfile.mkdtemp(prefix="gpuperf-ref-wall-"))
    repo, plain = work / "repo", work / "plain"
    detection.write_suite(repo, 0)
    detection.make_ref_repo(repo)
    detection.git(repo, "checkout", "-q", f"head-{args.level}")
    detection.write_suite(plain, 0)
    storage = ["-p", "no:gpuperf", f"--benchmark-storage=file://{plain / '.benchmarks'}", "pb"]
    subprocess.run([*detection.PYTEST, "--benchmark-save=base", *storage], cwd=plain, capture_output=True, check=False)
    detection.set_extra(plain, args.level)
    versions = {"A": args.a, "B": args.b}
    out: dict[str, list[tuple[float, int, bool]]] = {"A": [], "B": [], "pytest-benchmark": []}
    for i in range(args.rounds):
        for side in (("A", "B") if i % 2 == 0 else ("B", "A")) + ("pytest-benchmark",):
            started = time.perf_counter()
            if side == "pytest-benchmark":
                cmd = [*detection.PYTEST, "--benchmark-compare=0001", "--benchmark-compare-fail=median:5%", *storage]
                proc = subprocess.run(cmd, cwd=plain, capture_output=True, text=True, check=False)
                suspected = False
            else:
                results = work / "results.json"
                cmd = [*detection.PYTEST, "-p", "no:benchmark", "--gpuperf", "--gpuperf-compare-ref=base", "gp",
                       f"--gpuperf-json={results}"]  # fmt: skip
                env = dict(os.environ, PYTHONPATH=str(versions[side]))
                proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, check=False)
                suspected = results.exists() and "fresh process pair" in results.read_text()
            wall = time.perf_counter() - started
            out[side].append((round(wall, 2), proc.returncode, suspected))
            print(
                f"round {i + 1} {side}: {wall:.1f}s exit {proc.returncode}{' suspicion' if suspected else ''}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    pb = statistics.median(w for w, _, _ in out["pytest-benchmark"])
    for side in ("A", "B"):  # each session over the pytest-benchmark session of its round
        paired = [w / ref for (w, _, _), (ref, _, _) in zip(out[side], out["pytest-benchmark"], strict=True)]
        print(f"{side}: paired median {statistics.median(paired):.2f}x pytest-benchmark ({len(paired)} rounds)")
    for side, rows in out.items():
        walls = [w for w, _, _ in rows]
        clean = [w for w, _, s in rows if not s]
        median = statistics.median(walls)
        clean_median = statistics.median(clean) if clean else float("nan")
        print(
            f"{side}: median {median:.1f}s ({median / pb:.2f}x pytest-benchmark), "
            f"mean {statistics.mean(walls):.1f}s, without a suspicion {clean_median:.1f}s "
            f"({len(clean)} of {len(rows)}), exit 1 in {sum(rc == 1 for _, rc, _ in rows)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
