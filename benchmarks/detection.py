"""Detection benchmark: false alarms and caught slowdowns of each perf gate, over repeated trials.

    python benchmarks/detection.py --trials 20 --json detection.json
    python benchmarks/detection.py --from-json detection.json   # the table again, also of a partial run

It writes a small torch CPU suite to a temporary folder (four tests, one of them
elementwise work on a 1 MiB tensor, whose every result is an allocation at
glibc's mmap threshold; the work of each is N units plus a fraction of N more
units, set by ``extra.py``: real injected extra work of 0, 3, 5, 10 and 15%),
then runs real pytest sessions:

* gpuperf baseline mode: ``--gpuperf-update-baseline`` on unchanged code, then
  ``--gpuperf`` once per level against that baseline;
* gpuperf compare-ref mode: a git repository with a base commit (0%) and one
  head commit per level; ``--gpuperf --gpuperf-compare-ref=base`` on each head;
* pytest-benchmark: ``--benchmark-save`` on unchanged code, then
  ``--benchmark-compare --benchmark-compare-fail=median:5%`` once per level.

A session that exits 1 raised an alarm: a false alarm at 0%, a detection
above it. Each trial uses a fresh baseline/save, so trials are independent.
The suite runs torch single-threaded (conftest.py) for every tool alike: on a
2-core runner with other load, two intra-op threads per process make every
timing depend on the scheduler more than on the code.
Wall time is that of the gating session (not the update/save run).
With ``--results-dir DIR`` every gpuperf gating session also writes its
``--gpuperf-json`` there (``TOOL-tTRIAL-lLEVEL.json``), so that each miss and
false alarm can be traced to its tests' changes, thresholds and notes
(``benchmarks/detection_trace.py DIR``).
``--unchanged-only`` runs the 0% sessions alone (``--levels=0``), for the false
alarm rate over many sessions; gpuperf sessions that report an improvement on
unchanged code count as false improvements (the summary line's count).
It is a benchmark, not a test: CI does not run it. Results: docs/detection.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from background_load import BackgroundLoad, describe

LEVELS: tuple[int, ...] = (0, 3, 5, 10, 15)
TOOLS = ("gpuperf-baseline", "gpuperf-ref", "pytest-benchmark")

WORKLOAD = """
import torch

from extra import EXTRA_PERCENT

UNITS = 100
EXTRA_UNITS = round(UNITS * EXTRA_PERCENT / 100)
TOTAL = UNITS + EXTRA_UNITS
torch.manual_seed(0)
A = torch.randn(48, 48)
B = torch.randn(48, 48)
X = torch.randn(4096)
X_LARGE = torch.randn(1 << 18)  # 1 MiB of float32
MLP = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)).eval()
BATCH = torch.randn(16, 64)


def matmul():
    out = A
    for _ in range(TOTAL):
        out = torch.mm(A, B).relu_()
    return out


def elementwise():
    out = X
    for _ in range(TOTAL):
        out = (X * 1.0001 + 0.5).tanh_()
    return out


def large_elementwise():
    out = X_LARGE
    for _ in range(TOTAL):
        out = X_LARGE * 1.0001
    return out


@torch.no_grad()
def mlp():
    out = BATCH
    for _ in range(TOTAL):
        out = MLP(BATCH)
    return out
"""

CONFTEST = """
import torch

torch.set_num_threads(1)
"""

TEST_GPUPERF = """
import workload


def test_matmul(gpu_bench):
    gpu_bench(workload.matmul)


def test_elementwise(gpu_bench):
    gpu_bench(workload.elementwise)


def test_mlp(gpu_bench):
    gpu_bench(workload.mlp)


def test_large_elementwise(gpu_bench):
    gpu_bench(workload.large_elementwise)
"""

TEST_BENCHMARK = """
import workload


def test_matmul(benchmark):
    benchmark(workload.matmul)


def test_elementwise(benchmark):
    benchmark(workload.elementwise)


def test_mlp(benchmark):
    benchmark(workload.mlp)


def test_large_elementwise(benchmark):
    benchmark(workload.large_elementwise)
"""

RESULTS_DIR: Path | None = None  # --results-dir

PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly")


@dataclass
class Session:
    tool: str
    trial: int
    level: int
    alarm: bool
    returncode: int
    wall_s: float
    improvement: bool | None = None  # gpuperf reported an improvement (a false one at 0%); None: not recorded


def write_suite(root: Path, extra: int) -> None:
    (root / "gp").mkdir(parents=True, exist_ok=True)
    (root / "pb").mkdir(parents=True, exist_ok=True)
    (root / "workload.py").write_text(WORKLOAD)
    (root / "conftest.py").write_text(CONFTEST)
    (root / "gp" / "test_gp.py").write_text(TEST_GPUPERF)
    (root / "pb" / "test_pb.py").write_text(TEST_BENCHMARK)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    set_extra(root, extra)


def set_extra(root: Path, extra: int) -> None:
    (root / "extra.py").write_text(f"EXTRA_PERCENT = {extra}\n")


def run(root: Path, args: Sequence[str], log: Path) -> tuple[int, float, bool]:
    start = time.perf_counter()
    proc = subprocess.run([*PYTEST, *args], cwd=root, capture_output=True, text=True)
    wall = time.perf_counter() - start
    with log.open("a") as fh:
        fh.write(f"$ pytest {' '.join(args)}  (cwd {root}) -> {proc.returncode} in {wall:.1f}s\n")
        fh.write(proc.stdout[-4000:] + proc.stderr[-2000:] + "\n")
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"pytest {' '.join(args)} in {root} exited {proc.returncode}; see {log}")
    return proc.returncode, wall, improved(proc.stdout)


def improved(stdout: str) -> bool:
    """Whether a gpuperf session's summary line counts an improvement."""
    summary = re.search(r"gpuperf: \d+ regressions?, (\d+) improvements?", stdout)
    return bool(summary and int(summary.group(1)))


def results_args(tool: str, trial: int, level: int) -> list[str]:
    """``--gpuperf-json`` into ``--results-dir`` for one gating session, if one was given."""
    if RESULTS_DIR is None:
        return []
    return [f"--gpuperf-json={RESULTS_DIR / f'{tool}-t{trial + 1}-l{level}.json'}"]


def trial_baseline(root: Path, trial: int, log: Path) -> list[Session]:
    baselines = root / "baselines"
    shutil.rmtree(baselines, ignore_errors=True)
    set_extra(root, 0)
    common = ["-p", "no:benchmark", f"--gpuperf-baseline-dir={baselines}", "gp"]
    run(root, ["--gpuperf-update-baseline", *common], log)
    out = []
    for level in LEVELS:
        set_extra(root, level)
        rc, wall, better = run(root, ["--gpuperf", *common, *results_args("gpuperf-baseline", trial, level)], log)
        out.append(Session("gpuperf-baseline", trial, level, rc == 1, rc, wall, better))
    return out


def trial_pytest_benchmark(root: Path, trial: int, log: Path) -> list[Session]:
    storage = root / ".benchmarks"
    shutil.rmtree(storage, ignore_errors=True)
    set_extra(root, 0)
    common = ["-p", "no:gpuperf", f"--benchmark-storage=file://{storage}", "pb"]
    run(root, ["--benchmark-save=base", *common], log)
    out = []
    for level in LEVELS:
        set_extra(root, level)
        rc, wall, _ = run(root, ["--benchmark-compare=0001", "--benchmark-compare-fail=median:5%", *common], log)
        out.append(Session("pytest-benchmark", trial, level, rc == 1, rc, wall))
    return out


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def make_ref_repo(root: Path) -> None:
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "bench@example.com")
    git(root, "config", "user.name", "bench")
    (root / ".gitignore").write_text("baselines/\n.benchmarks/\n__pycache__/\n")
    set_extra(root, 0)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    git(root, "tag", "base")
    for level in LEVELS:
        git(root, "checkout", "-q", "-b", f"head-{level}", "base")
        set_extra(root, level)
        git(root, "commit", "-q", "--allow-empty", "-am", f"{level}% more work")
    git(root, "checkout", "-q", "main")


def trial_ref(root: Path, trial: int, log: Path) -> list[Session]:
    out = []
    for level in LEVELS:
        git(root, "checkout", "-q", f"head-{level}")
        args = ["-p", "no:benchmark", "--gpuperf", "--gpuperf-compare-ref=base", "gp"]
        rc, wall, better = run(root, [*args, *results_args("gpuperf-ref", trial, level)], log)
        out.append(Session("gpuperf-ref", trial, level, rc == 1, rc, wall, better))
    git(root, "checkout", "-q", "main")
    leftover = git(root, "worktree", "list", "--porcelain").count("worktree ")
    if leftover != 1:
        raise RuntimeError(f"compare-ref left {leftover - 1} worktree(s) behind in {root}")
    return out


def machine() -> dict[str, object]:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "loadavg_start": os.getloadavg(),
    }


def _load(value: object) -> str:
    if not isinstance(value, (list, tuple)):
        return "n/a"
    return "/".join(f"{float(v):.1f}" for v in value)


def _load_line(load: object) -> list[str]:
    if not isinstance(load, dict) or not load.get("processes"):
        return []
    if load.get("kind") == "hog":
        return [f"CPU hogs: {load['processes']} process(es) spinning a full core throughout"]
    return [
        f"Synthetic background load: {load['processes']} process(es), each busy {load['busy_s']} s "
        f"then idle {load['idle_s']} s (uniform), streaming a {int(load['array_bytes']) >> 20} MiB array"
    ]


def _wall_figures(mine: Sequence[Session]) -> tuple[float, float, float]:
    """Median and mean wall of the unchanged sessions (0%, else all), and the median of all."""
    unchanged = [s.wall_s for s in mine if s.level == 0] or [s.wall_s for s in mine]
    return statistics.median(unchanged), statistics.mean(unchanged), statistics.median(s.wall_s for s in mine)


def paired_ratios(sessions: Sequence[Session], tool: str, confirming: bool) -> list[float]:
    """``tool``'s wall time over pytest-benchmark's in the same trial and level: unchanged sessions, or alarms.

    The tools run one after the other in each trial, so each ratio pairs two sessions
    that saw the same host load; ``confirming`` takes the sessions above 0% that
    raised an alarm (a gpuperf one confirmed a regression first).
    """
    reference = {(s.trial, s.level): s.wall_s for s in sessions if s.tool == "pytest-benchmark"}
    return [
        s.wall_s / reference[(s.trial, s.level)]
        for s in sessions
        if s.tool == tool and (s.trial, s.level) in reference
        and ((s.level > 0 and s.alarm) if confirming else s.level == 0)
    ]  # fmt: skip


def paired_lines(sessions: Sequence[Session]) -> list[str]:
    """The median of the paired wall-time ratios per gpuperf tool, unchanged and confirming."""
    lines = []
    for tool in TOOLS[:2]:
        parts = []
        for confirming, label in ((False, "unchanged"), (True, "confirming a regression")):
            ratios = paired_ratios(sessions, tool, confirming)
            if ratios:
                parts.append(f"{label} {statistics.median(ratios):.2f}x (n={len(ratios)}, "
                             f"{min(ratios):.2f}-{max(ratios):.2f})")  # fmt: skip
        if parts:
            lines.append(f"Paired wall time of {tool} over pytest-benchmark's, median: " + "; ".join(parts))
    return lines


def table(sessions: Sequence[Session], info: dict[str, object]) -> str:
    """Markdown: per tool, alarms at each level over trials, and the gating session's wall time.

    Wall time is given for unchanged code first: that is what a suite costs on
    most runs. Sessions that catch a slowdown pay for its confirmation, so the
    median over all sessions depends on how many levels were run.
    """
    lines = [
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['platform']}, Python {info['python']}, "
        f"torch {info['torch']}; load average (1/5/15 min) at start {_load(info.get('loadavg_start'))}, "
        f"at end {_load(info.get('loadavg_end'))}",
        *_load_line(info.get("background_load")),
        *_load_line(info.get("hogs")),
        "",
        "| tool | trials | "
        + " | ".join("false alarms (0%)" if level == 0 else f"caught {level}%" for level in LEVELS)
        + " | false improvements (0%) | wall s, unchanged: median (mean) | vs pytest-benchmark"
        " | wall s, all sessions: median |",
        "|---|---|" + "---|" * len(LEVELS) + "---|---|---|---|",
    ]
    walls = {t: _wall_figures([s for s in sessions if s.tool == t])
             for t in TOOLS if any(s.tool == t for s in sessions)}  # fmt: skip
    for tool in TOOLS:
        mine = [s for s in sessions if s.tool == tool]
        if not mine:
            continue
        cells = []
        for level in LEVELS:
            at = [s for s in mine if s.level == level]
            hits = sum(s.alarm for s in at)
            cells.append(f"{hits}/{len(at)} ({hits / len(at):.0%})" if at else "-")
        unchanged = [s for s in mine if s.level == 0]
        known = [s.improvement for s in unchanged if s.improvement is not None]
        recorded = known and tool != "pytest-benchmark"
        cells.append(f"{sum(known)}/{len(known)}" if recorded else "-")
        median, mean, overall = walls[tool]
        ref = walls.get("pytest-benchmark")
        rel = f"{median / ref[0]:.2f}x (mean {mean / ref[1]:.2f}x)" if ref else "-"
        trials = len({s.trial for s in mine})
        lines.append(f"| {tool} | {trials} | {' | '.join(cells)} | {median:.1f} ({mean:.1f}) | {rel} | {overall:.1f} |")
    paired = paired_lines(sessions)
    return "\n".join([*lines, *([""] if paired else []), *paired])


def main(argv: Sequence[str] | None = None) -> int:
    global LEVELS, RESULTS_DIR
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated subset of {','.join(TOOLS)}")
    parser.add_argument("--json", type=Path, default=None, help="write all session results here, as it goes")
    parser.add_argument("--keep", action="store_true", help="keep the temporary suite folder")
    parser.add_argument(
        "--levels",
        default=",".join(map(str, LEVELS)),
        help="comma-separated percentages of injected extra work (0 = unchanged code)",
    )
    parser.add_argument(
        "--unchanged-only",
        action="store_true",
        help="unchanged code only (--levels=0): false alarms and false improvements per session",
    )
    parser.add_argument(
        "--from-json",
        type=Path,
        default=None,
        metavar="PATH",
        help="print the table of a --json file written earlier (also a partial one) and exit",
    )
    parser.add_argument(
        "--background-load",
        type=int,
        default=0,
        metavar="N",
        help="run N synthetic noisy-neighbour processes throughout (background_load.py)",
    )
    parser.add_argument(
        "--hogs",
        type=int,
        default=0,
        metavar="N",
        help="run N processes spinning a full core throughout (background_load.py, kind hog): busy all session",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep each gpuperf gating session's --gpuperf-json here (detection_trace.py reads them)",
    )
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        sessions_read = [Session(**s) for s in saved["sessions"]]  # older files lack "improvement"
        LEVELS = tuple(sorted({s.level for s in sessions_read}))
        print(table(sessions_read, saved["machine"]))
        return 0
    LEVELS = (0,) if args.unchanged_only else tuple(int(v) for v in args.levels.split(",") if v.strip())
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = set(tools) - set(TOOLS)
    if unknown:
        parser.error(f"unknown tool(s) {sorted(unknown)}; choose from {TOOLS}")
    if args.results_dir is not None:
        args.results_dir.mkdir(parents=True, exist_ok=True)
        RESULTS_DIR = args.results_dir.resolve()
    info = machine()
    if args.background_load:
        info["background_load"] = describe(args.background_load)
    if args.hogs:
        info["hogs"] = describe(args.hogs, kind="hog")
    work = Path(tempfile.mkdtemp(prefix="gpuperf-detection-"))
    log = work / "sessions.log"
    plain, repo = work / "plain", work / "repo"
    write_suite(plain, 0)
    write_suite(repo, 0)
    make_ref_repo(repo)
    print(f"suite in {work}; session log {log}", flush=True)
    runners = {"gpuperf-baseline": (trial_baseline, plain), "gpuperf-ref": (trial_ref, repo),
               "pytest-benchmark": (trial_pytest_benchmark, plain)}  # fmt: skip
    sessions: list[Session] = []
    try:
        with BackgroundLoad(args.background_load), BackgroundLoad(args.hogs, kind="hog"):
            for trial in range(args.trials):
                for tool in tools:  # interleaved so slow drift in machine load hits every tool alike
                    fn, root = runners[tool]
                    done = fn(root, trial, log)
                    sessions.extend(done)
                    marks = " ".join(f"{s.level}%:{'ALARM' if s.alarm else 'ok'}" for s in done)
                    print(f"trial {trial + 1}/{args.trials} {tool}: {marks}", flush=True)
                if args.json:
                    saved = {"machine": info, "sessions": [asdict(s) for s in sessions]}
                    args.json.write_text(json.dumps(saved, indent=1))
    finally:
        info["loadavg_end"] = os.getloadavg()
        if args.json:
            args.json.write_text(json.dumps({"machine": info, "sessions": [asdict(s) for s in sessions]}, indent=1))
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(table(sessions, info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
