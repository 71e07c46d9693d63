"""Labelled change-point benchmark: gpuperf's detector against asv and Apache Otava, same series, same run.

    python benchmarks/history_detection.py                      # the comparison table
    python benchmarks/history_detection.py --scale 500x1000     # also time find_changes on 500 series of 1,000 runs
    python benchmarks/history_detection.py --json benchmarks/results/history_detection.json

**Noise from real sessions.** Each synthetic run takes its noise from a recorded session
(``benchmarks/results/history_noise.json``, written by ``benchmarks/history_noise_record.py``:
repeated ``pytest --gpuperf --gpuperf-json`` sessions of ``scripts/demo_project`` on unchanged
code). A run draws one recorded session of one test at random: its median's relative
deviation from that test's overall median (the between-run noise) and its own reported
precision (the run's interval, which gpuperf's detector uses as a weight). ``--noise-scale``
multiplies the deviations for a noisier fleet.

**Planted changes** (seeded): flat series; one step of 2-20% up or down; a creep (1% per
commit over ten commits, or 2% over five); long series (200 commits) with two steps and a
creep; fleets of three runners where the third, reading 3-8% apart, joins at commit 10-20
(half of them with a 5-10% step later). A quarter of the 50-commit flat and step series have
two runners per commit (two runs at each commit: gpuperf pools them; asv and Otava get the
per-commit mean, as asv's own graphs do).

**Scoring.** A detection is ``(last_good, first_bad)`` in commit indices. It matches a step
planted at commit k when ``|first_bad - k| <= --tolerance``, a creep when its commit range
overlaps the creep's widened by the tolerance. Each planted change matches at most one
detection; further detections inside a matched creep are counted as duplicates (neither true
nor false), every other unmatched detection is a false positive. The targets: no change point
on at least 99 of the 100 flat series; at least 95% of steps of three times the series' noise
(the robust standard deviation of the recorded deviations) found within one commit; creeps
found.

**The other tools** run in their own virtualenvs under ``.bench-envs/`` (git-ignored, created
on first use: ``asv==0.6.6``, ``apache-otava==0.8.0``) through a small JSON-in/JSON-out adapter,
so their pins never touch the project's environment. asv: ``asv.step_detect.detect_steps(y,
w)`` with asv's weight ``2 / |CI width|``; each boundary between its piecewise-constant
segments is a change point. Otava: ``otava.analysis.compute_change_points(y, window_len=50,
max_pvalue=0.001)`` (its defaults); each returned index is a change point.

It is a benchmark, not a test: CI does not run it. Results: docs/change-points.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import time
import venv
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from _common import RESULTS, ROOT

from pytest_gpuperf.history.detect import DetectorConfig, find_changes
from pytest_gpuperf.history.model import Point, Series, SeriesKey

NOISE_FILES = [RESULTS / "history_noise.json", RESULTS / "history_noise_loaded.json"]
ENVS = ROOT / ".bench-envs"
TOOL_PINS = {"asv": "asv==0.6.6", "otava": "apache-otava==0.8.0"}
STEP_SIZES = (0.02, 0.03, 0.05, 0.08, 0.12, 0.20)

# The adapters run inside each tool's own virtualenv: JSON {"series": [{"y": [...], "w": [...]}]}
# on stdin, a list of change-point indices (first commit at the new level) per series on stdout.
ADAPTERS = {
    "asv": """
import json, sys
from asv.step_detect import detect_steps
out = []
for s in json.load(sys.stdin)["series"]:
    steps = detect_steps(s["y"], s["w"])
    out.append([left for left, _right, _value, _min, _err in steps[1:]])
json.dump(out, sys.stdout)
""",
    "otava": """
import json, sys
from otava.analysis import compute_change_points
out = []
for s in json.load(sys.stdin)["series"]:
    points, _weak = compute_change_points(s["y"], window_len=50, max_pvalue=0.001)
    out.append([int(p.index) for p in points])
json.dump(out, sys.stdout)
""",
}


@dataclass(frozen=True)
class Noise:
    """One recorded test's sessions: relative deviations from its median, and their own precisions."""

    test: str
    deviations: np.ndarray
    precisions: np.ndarray

    @property
    def sd(self) -> float:
        """The robust standard deviation of the deviations: "the noise" of "three times the noise"."""
        d = self.deviations
        return float(1.4826 * np.median(np.abs(d - np.median(d))))

    def draw(self, rng: np.random.Generator) -> tuple[float, float]:
        j = int(rng.integers(self.deviations.size))
        return float(self.deviations[j]), float(self.precisions[j])


def load_noise(paths: Sequence[Path]) -> list[Noise]:
    """Every recorded session of each test, from all files (quiet and busy machine alike)."""
    runs: dict[str, list[dict[str, float]]] = {}
    for path in paths:
        for test, sessions in json.loads(path.read_text())["tests"].items():
            runs.setdefault(test, []).extend(sessions)
    pools = []
    for test, sessions in runs.items():
        medians = np.array([r["median_ns"] for r in sessions], dtype=float)
        precisions = np.array([r["precision"] for r in sessions], dtype=float)
        pools.append(Noise(test, medians / np.median(medians) - 1, precisions))
    return pools


@dataclass
class Case:
    """A labelled series: what was planted, and the series itself."""

    name: str
    kind: str  # "flat", "step", "creep", "long"
    series: Series
    steps: list[tuple[int, float]] = field(default_factory=list)  # (first commit at new level, relative size)
    creeps: list[tuple[int, int]] = field(default_factory=list)  # (last commit at old level, first at new)
    noise_sd: float = 0.0


def _series(
    name: str,
    levels: np.ndarray,
    runners: int,
    noise: Noise,
    scale: float,
    rng: np.random.Generator,
    disturbed: float = 0.0,
    offsets: Sequence[float] = (),
    joins: Sequence[int] = (),
) -> Series:
    """Runs at each commit from ``runners`` runners; runner r reads ``offsets[r]`` apart and
    measures from commit ``joins[r]`` on (defaults: alike, from the start)."""
    points = []
    for i, level in enumerate(levels):
        commit = f"{i:040x}"
        for r in range(runners):
            if joins and i < joins[r]:
                continue
            deviation, half = noise.draw(rng)
            deviation *= scale
            if offsets:
                deviation = (1 + deviation) * (1 + offsets[r]) - 1
            if rng.random() < disturbed:
                # A disturbed run (throttling, a noisy neighbour mid-run): far off, and its own
                # samples say so, as gpuperf's interval of a run whose samples scatter does.
                deviation = float(rng.uniform(0.05, 0.20)) * (1 if rng.random() < 0.5 else -1)
                half = abs(deviation) * float(rng.uniform(0.5, 1.5))
            value = float(level * (1 + deviation))
            points.append(
                Point(f"{name}-{i}-{r}", commit, "", f"runner-{r}", value, value * (1 - half), value * (1 + half))
            )
    key = SeriesKey(name, "default", "time.p50", "cpu", "main")
    return Series(key, "ns", "lower", tuple(points))


def make_cases(pools: Sequence[Noise], scale: float, seed: int, disturbed: float) -> list[Case]:
    rng = np.random.default_rng(seed)
    cases: list[Case] = []

    def add(kind: str, levels: np.ndarray, steps: list[tuple[int, float]], creeps: list[tuple[int, int]]) -> None:
        noise = pools[int(rng.integers(len(pools)))]
        runners = 2 if kind in ("flat", "step") and rng.random() < 0.25 else 1
        name = f"{kind}-{len(cases)}"
        # A third of the series come from a fleet where some runs are disturbed.
        share = disturbed if rng.random() < 1 / 3 else 0.0
        series = _series(name, levels, runners, noise, scale, rng, share)
        cases.append(Case(name, kind, series, steps, creeps, noise.sd * scale))

    for _ in range(100):
        add("flat", np.full(50, 1e6), [], [])
    for size in STEP_SIZES:
        for _ in range(40):
            at = int(rng.integers(10, 41))
            change = size * (1 if rng.random() < 0.5 else -1)
            levels = np.full(50, 1e6)
            levels[at:] *= 1 + change
            add("step", levels, [(at, change)], [])
    for rate, length, count in ((0.01, 10, 40), (0.02, 5, 20)):
        for _ in range(count):
            start = int(rng.integers(10, 50 - length - 9))
            sign = 1 if rng.random() < 0.5 else -1
            levels = np.full(50, 1e6)
            levels[start : start + length] *= (1 + sign * rate) ** np.arange(1, length + 1)
            levels[start + length :] = levels[start + length - 1]
            add("creep", levels, [], [(start - 1, start + length - 1)])
    for _ in range(40):
        levels = np.full(200, 1e6)
        a = int(rng.integers(20, 70))
        b = int(rng.integers(a + 40, 140))
        c = int(rng.integers(b + 20, 180))
        sa = float(rng.uniform(0.05, 0.15)) * (1 if rng.random() < 0.5 else -1)
        sb = float(rng.uniform(0.05, 0.15)) * (1 if rng.random() < 0.5 else -1)
        levels[a:] *= 1 + sa
        levels[b:] *= 1 + sb
        levels[c : c + 10] *= 1.01 ** np.arange(1, 11)
        levels[c + 10 :] *= 1.01**10
        add("long", levels, [(a, sa), (b, sb)], [(c - 1, c + 9)])
    for n in range(40):
        # A fleet: runners 0 and 1 at every commit; runner 2, reading 3-8% apart, joins at
        # commit 10-20. Half the series also step by 5-10% at a later commit.
        noise = pools[int(rng.integers(len(pools)))]
        joins = int(rng.integers(10, 21))
        offset = float(rng.uniform(0.03, 0.08)) * (1 if rng.random() < 0.5 else -1)
        levels = np.full(50, 1e6)
        steps: list[tuple[int, float]] = []
        if n % 2:
            at = int(rng.integers(joins + 8, 43))
            change = float(rng.uniform(0.05, 0.10)) * (1 if rng.random() < 0.5 else -1)
            levels[at:] *= 1 + change
            steps.append((at, change))
        name = f"fleet-{len(cases)}"
        series = _series(name, levels, 3, noise, scale, rng, offsets=(0.0, 0.0, offset), joins=(0, 0, joins))
        cases.append(Case(name, "fleet", series, steps, [], noise.sd * scale))
    return cases


# --- the tools ---------------------------------------------------------------------------


def _per_commit(series: Series) -> tuple[list[float], list[float]]:
    """Mean value and mean asv weight (2 / CI width) per commit, in commit order (what asv's graphs do)."""
    values: dict[str, list[float]] = {}
    weights: dict[str, list[float]] = {}
    for p in series.points:
        values.setdefault(p.commit, []).append(p.value)
        width = (p.ci_high or p.value) - (p.ci_low or p.value)
        weights.setdefault(p.commit, []).append(2 / width if width > 0 else 1.0)
    return [float(np.mean(v)) for v in values.values()], [float(np.mean(w)) for w in weights.values()]


def ensure_env(tool: str) -> Path:
    """The tool's own virtualenv under .bench-envs/, created and installed on first use."""
    env = ENVS / tool
    python = env / "bin" / "python"
    marker = env / ".installed"
    if not marker.exists() or marker.read_text().strip() != TOOL_PINS[tool]:
        print(f"creating {env} with {TOOL_PINS[tool]} (first use)...", flush=True)
        venv.create(env, with_pip=True, clear=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", TOOL_PINS[tool]], check=True)
        marker.write_text(TOOL_PINS[tool] + "\n")
    return python


def run_external(tool: str, cases: Sequence[Case]) -> tuple[list[list[tuple[int, int]]], float]:
    python = ensure_env(tool)
    payload = {"series": [dict(zip(("y", "w"), _per_commit(c.series), strict=True)) for c in cases]}
    start = time.perf_counter()
    proc = subprocess.run(
        [str(python), "-c", ADAPTERS[tool]], input=json.dumps(payload), capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{tool} adapter failed:\n{proc.stderr[-3000:]}")
    found = json.loads(proc.stdout)
    return [[(k - 1, k) for k in sorted(indices)] for indices in found], elapsed


@dataclass
class Shapes:
    """Whether gpuperf's detections have the planted shape (only it reports one)."""

    step_detections: int = 0
    step_detections_gradual: int = 0
    creep_series: int = 0
    creep_series_gradual: int = 0

    def line(self) -> str:
        steps = 1 - self.step_detections_gradual / max(self.step_detections, 1)
        creeps = self.creep_series_gradual / max(self.creep_series, 1)
        return (
            f"  shape: {steps:.1%} of detections in step series are steps;"
            f" {creeps:.1%} of creep series show a gradual change"
        )


def run_gpuperf(cases: Sequence[Case], config: DetectorConfig) -> tuple[list[list[tuple[int, int]]], float, Shapes]:
    start = time.perf_counter()
    out = []
    found = []
    for case in cases:
        changes = find_changes(case.series, config)
        commits = {c: i for i, c in enumerate(dict.fromkeys(p.commit for p in case.series.points))}
        out.append([(commits[c.last_good], commits[c.first_bad]) for c in changes])
        found.append(changes)
    elapsed = time.perf_counter() - start
    shapes = Shapes()
    for case, changes in zip(cases, found, strict=True):
        if case.kind == "step":
            shapes.step_detections += len(changes)
            shapes.step_detections_gradual += sum(c.gradual for c in changes)
        elif case.kind == "creep":
            shapes.creep_series += 1
            shapes.creep_series_gradual += any(c.gradual for c in changes)
    return out, elapsed, shapes


# --- scoring -----------------------------------------------------------------------------


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    duplicates: int = 0
    flat_clean: int = 0
    flat_total: int = 0
    big_steps: int = 0  # planted steps of at least three times the noise
    big_steps_within_1: int = 0
    creeps: int = 0
    creeps_found: int = 0
    step_distances: list[int] = field(default_factory=list)
    by_size: dict[float, list[int]] = field(default_factory=dict)  # planted |size| -> [found, planted]
    fp_by_kind: dict[str, int] = field(default_factory=dict)

    def sizes_line(self) -> str:
        cells = [f"{size:.0%}: {found / total:.0%}" for size, (found, total) in sorted(self.by_size.items())]
        fps = ", ".join(f"{kind} {count}" for kind, count in self.fp_by_kind.items())
        return "  steps found by size: " + ", ".join(cells) + f"; false positives in {fps}"

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score(cases: Sequence[Case], detections: Sequence[list[tuple[int, int]]], tolerance: int) -> Score:
    s = Score()
    for case, found in zip(cases, detections, strict=True):
        free = list(found)
        if case.kind == "flat":
            s.flat_total += 1
            s.flat_clean += not found
        for at, size in case.steps:
            best = min(free, key=lambda d: abs(d[1] - at), default=None)
            big = abs(size) >= 3 * case.noise_sd
            s.big_steps += big
            tally = s.by_size.setdefault(abs(size), [0, 0]) if case.kind == "step" else [0, 0]
            tally[1] += 1
            if best is not None and abs(best[1] - at) <= tolerance:
                tally[0] += 1
                free.remove(best)
                s.tp += 1
                s.step_distances.append(abs(best[1] - at))
                s.big_steps_within_1 += big and abs(best[1] - at) <= 1
            else:
                s.fn += 1
        for last_good, first_bad in case.creeps:
            s.creeps += 1
            lo, hi = last_good - tolerance, first_bad + tolerance
            inside = [d for d in free if d[1] >= lo and d[0] <= hi]
            if inside:
                s.tp += 1
                s.creeps_found += 1
                for d in inside:
                    free.remove(d)
                s.duplicates += len(inside) - 1
            else:
                s.fn += 1
        s.fp += len(free)
        s.fp_by_kind[case.kind] = s.fp_by_kind.get(case.kind, 0) + len(free)
    return s


def _row(name: str, s: Score, seconds: float) -> str:
    dist = np.array(s.step_distances) if s.step_distances else np.array([0])
    within1 = s.big_steps_within_1 / s.big_steps if s.big_steps else float("nan")
    creeps = s.creeps_found / s.creeps if s.creeps else float("nan")
    return (
        f"{name:<26}{s.tp:>5}{s.fp:>5}{s.fn:>5}{s.duplicates:>5}  {s.precision:>9.3f}{s.recall:>7.3f}{s.f1:>7.3f}"
        f"  {s.flat_clean:>3}/{s.flat_total:<3}   {within1:>8.1%}   {creeps:>6.1%}  {np.mean(dist):>9.2f}"
        f"  {seconds:>7.2f}"
    )


HEADER = (
    f"{'detector':<26}{'TP':>5}{'FP':>5}{'FN':>5}{'dup':>5}  {'precision':>9}{'recall':>7}{'F1':>7}"
    f"  {'flat clean':>10}  {'>=3sd <=1c':>10}  {'creeps':>7}  {'mean dist':>9}  {'time s':>7}"
)


def scale_timing(spec: str, pools: Sequence[Noise], seed: int) -> dict[str, float]:
    n_series, n_runs = (int(x) for x in spec.lower().split("x"))
    rng = np.random.default_rng(seed + 1)
    series = []
    for i in range(n_series):
        levels = np.full(n_runs, 1e6)
        if i % 2:
            levels[int(rng.integers(n_runs // 10, n_runs - n_runs // 10)) :] *= 1.1
        series.append(_series(f"scale-{i}", levels, 1, pools[i % len(pools)], 1.0, rng))
    start = time.perf_counter()
    found = sum(len(find_changes(s)) for s in series)
    elapsed = time.perf_counter() - start
    print(
        f"\nscale: find_changes on {n_series} series x {n_runs} runs (half with a 10% step):"
        f" {elapsed:.1f} s, {found} change points"
    )
    return {"series": n_series, "runs": n_runs, "seconds": elapsed, "change_points": found}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _config(settings: Sequence[str]) -> DetectorConfig:
    defaults = DetectorConfig()
    changes: dict[str, object] = {}
    for setting in settings:
        name, _, value = setting.partition("=")
        if not hasattr(defaults, name):
            raise SystemExit(f"--set {setting}: DetectorConfig has no setting {name!r}")
        kind = type(getattr(defaults, name))
        changes[name] = value.lower() in ("1", "true", "yes") if kind is bool else kind(value)
    return dataclasses.replace(defaults, **changes)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--noise", type=Path, nargs="+", default=NOISE_FILES, help="recorded sessions (history_noise_record.py)"
    )
    parser.add_argument(
        "--disturbed", type=float, default=0.04, help="share of disturbed runs in a third of the series (0: none)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="independent sets of series (seeds seed, seed+1, ...)")
    parser.add_argument("--noise-scale", type=float, default=1.0, help="multiply the recorded deviations")
    parser.add_argument("--tolerance", type=int, default=5, help="commits a detection may miss by and still match")
    parser.add_argument("--tools", default="gpuperf,gpuperf-unweighted,asv,otava")
    parser.add_argument("--scale", metavar="SERIESxRUNS", help="also time find_changes, e.g. 500x1000")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a DetectorConfig setting for gpuperf's rows"
    )
    args = parser.parse_args()

    config = _config(args.set)
    pools = load_noise(args.noise)
    cases = [
        case
        for seed in range(args.seed, args.seed + args.repeats)
        for case in make_cases(pools, args.noise_scale, seed, args.disturbed)
    ]
    for pool in pools:
        print(f"noise: {pool.test}: {pool.deviations.size} sessions, robust sd {pool.sd * args.noise_scale:.2%}")
    kinds = {k: sum(c.kind == k for c in cases) for k in ("flat", "step", "creep", "long", "fleet")}
    print(f"{len(cases)} series: {kinds}; {args.repeats} set(s) of series; tolerance {args.tolerance} commits")
    print(HEADER)
    results: dict[str, dict[str, object]] = {}
    for tool in args.tools.split(","):
        shapes = None
        if tool == "gpuperf":
            found, seconds, shapes = run_gpuperf(cases, config)
        elif tool == "gpuperf-unweighted":
            found, seconds, shapes = run_gpuperf(cases, dataclasses.replace(config, use_precision=False))
        else:
            found, seconds = run_external(tool, cases)
        s = score(cases, found, args.tolerance)
        print(_row(tool, s, seconds), flush=True)
        print(s.sizes_line(), flush=True)
        if shapes is not None:
            print(shapes.line(), flush=True)
        results[tool] = {
            "shapes": vars(shapes) if shapes is not None else None,
            "found_by_step_size": {f"{size:.2f}": v for size, v in sorted(s.by_size.items())},
            "false_positives_by_kind": s.fp_by_kind,
            "tp": s.tp,
            "fp": s.fp,
            "fn": s.fn,
            "duplicates": s.duplicates,
            "precision": s.precision,
            "recall": s.recall,
            "f1": s.f1,
            "flat_clean": s.flat_clean,
            "flat_total": s.flat_total,
            "big_steps_within_1": s.big_steps_within_1,
            "big_steps": s.big_steps,
            "creeps_found": s.creeps_found,
            "creeps": s.creeps,
            "mean_step_distance": float(np.mean(s.step_distances)) if s.step_distances else None,
            "seconds": seconds,
        }
    timing = scale_timing(args.scale, pools, args.seed) if args.scale else None
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "machine": {
                        "platform": platform.platform(),
                        "python": platform.python_version(),
                        "cpus": os.cpu_count(),
                        "cpu": _cpu_model(),
                        "loadavg_end": os.getloadavg(),
                    },
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "results": results,
                    "scale": timing,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
