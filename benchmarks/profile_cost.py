"""The wall time a confirmed regression's differential profile costs: sessions with and without it.

    python benchmarks/profile_cost.py --rounds 5 [--mode baseline|compare-ref|both] [--json out.json]

On the planted regressions of the profile tests (tests/profile_plants.py: an extra op in a
forward pass and a slower custom op, with an unchanged test beside them), each round runs
the regressed session twice in alternating order: as is, and with
``--gpuperf-no-profile-diff``. Baseline mode first records the baselines (with their
profiles); compare-ref runs against the base commit of a temporary git repository,
without confirmation pairs. Both sessions fail the same two tests; the difference of their
medians is what the two differential profiles cost, divided by two per regression. A
benchmark, not a test: CI does not run it.
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

from _common import ROOT, shared_test_helper

PLANTS = shared_test_helper("profile_plants")  # the profile tests' planted regressions, shared
DUMP_CONFTEST, MODELS = PLANTS.DUMP_CONFTEST, PLANTS.MODELS

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "forward or custom or steady"]
GATE = ["--gpuperf-threshold=0.25", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.4"]
REGRESSIONS = 2  # test_forward and test_custom regress; test_steady does not
PLANTED = MODELS.replace('os.environ.get("PLANT", "")', '"extra,custom"')


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def baseline_project(work: Path) -> tuple[Path, list[str]]:
    root = work / "baseline"
    root.mkdir()
    (root / "conftest.py").write_text(DUMP_CONFTEST)
    (root / "test_models.py").write_text(MODELS)
    subprocess.run([*PYTEST, "--gpuperf-update-baseline", *GATE], cwd=root, env=_env(), check=True,
                   capture_output=True)  # fmt: skip
    for path in (root / "baselines").rglob("*.json"):  # the machine's slow phases must not hide the regressions
        document = json.loads(path.read_text())
        for entry in document["entries"].values():
            entry.pop("reference_ns", None)
        path.write_text(json.dumps(document))
    (root / "test_models.py").write_text(PLANTED)
    return root, ["--gpuperf", "--gpuperf-remeasure=0", *GATE]


def compare_ref_project(work: Path) -> tuple[Path, list[str]]:
    root = work / "compare-ref"
    root.mkdir()
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "b@example.com")
    _git(root, "config", "user.name", "b")
    (root / "conftest.py").write_text(DUMP_CONFTEST)
    (root / "test_models.py").write_text(MODELS)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    (root / "test_models.py").write_text(PLANTED)
    _git(root, "commit", "-qam", "head")
    return root, ["--gpuperf-compare-ref=HEAD~1", "--gpuperf-confirm-pairs=0", *GATE]


def session(root: Path, args: list[str], diff: bool) -> float:
    """Wall seconds of one regressed session; checks that both regressions failed and what was profiled."""
    extra = [] if diff else ["--gpuperf-no-profile-diff"]
    started = time.perf_counter()
    done = subprocess.run([*PYTEST, *args, *extra], cwd=root, env=_env(), capture_output=True, text=True)
    wall = time.perf_counter() - started
    found = json.loads((root / "diffs.json").read_text())
    profiled = sum(1 for r in found.values() if r["diff"] is not None)
    if done.returncode != 1 or profiled != (REGRESSIONS if diff else 0):
        raise SystemExit(f"unexpected session (exit {done.returncode}, {profiled} diffs):\n{done.stdout[-3000:]}")
    return wall


def measure(mode: str, rounds: int, work: Path) -> dict[str, object]:
    root, args = baseline_project(work) if mode == "baseline" else compare_ref_project(work)
    times: dict[bool, list[float]] = {True: [], False: []}
    for i in range(rounds):
        for diff in (True, False) if i % 2 == 0 else (False, True):
            times[diff].append(session(root, args, diff))
    with_diff, without = statistics.median(times[True]), statistics.median(times[False])
    return {
        "mode": mode, "rounds": rounds, "with_diff_s": times[True], "without_diff_s": times[False],
        "median_with_s": with_diff, "median_without_s": without,
        "extra_per_regression_s": (with_diff - without) / REGRESSIONS,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mode", choices=("baseline", "compare-ref", "both"), default="both")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    modes = ("baseline", "compare-ref") if args.mode == "both" else (args.mode,)
    work = Path(tempfile.mkdtemp(prefix="gpuperf-profile-cost-"))
    results = [measure(mode, args.rounds, work) for mode in modes]
    for r in results:
        print(
            f"{r['mode']:>11}: session {r['median_with_s']:.2f} s with the profile diff, "
            f"{r['median_without_s']:.2f} s without (medians of {r['rounds']}); "
            f"{r['extra_per_regression_s']:+.2f} s per confirmed regression"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
