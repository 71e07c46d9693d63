"""Build time and size of the history dashboard at fleet scale, and how they grow with the number of runs.

    python benchmarks/history_scale.py [--series 500] [--runs 125,250,500,1000] [--repeat 1] [--json out.json]
                                       [--store sqlite] [--store postgresql]

Synthetic series built in memory: per test, the median time (with its p10-p90 band) and
the peak memory on two device classes, so 500 series are 125 tests, each a page with two
charts of two lines. Every fifth test has a planted 12% step with its change point and a
profile diff at the first bad run (a page of its own). For each number of runs the
script builds the whole site into a fresh folder and prints the wall time (the best of
``--repeat`` builds), the files written and their size; the last lines fit
``time ~ runs^k`` and ``size ~ runs^k`` over the sizes measured: k <= 1 is linear or
better.

With ``--store``, the same runs are then stored in a history store of that kind (a SQLite
file; a PostgreSQL database: a fresh one on the server that ``GPUPERF_BENCH_POSTGRES`` names,
whose role may create databases, else on a throwaway server started from Debian's
``postgresql`` package as the store's tests do), and three steps are timed for each number
of runs: the ingest (every run through ``HistoryStore.record``, one transaction each),
``gpuperf history changes --format json`` (the detector over every series) and ``gpuperf
history dashboard`` (series, change points and profile diffs read back, the site built).
A benchmark, not a test: CI does not run it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import itertools
import json
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from _common import shared_test_helper

from pytest_gpuperf.history.dashboard import build_site, diff_key
from pytest_gpuperf.history.model import (
    ChangeKind,
    ChangePoint,
    Point,
    RecordedValue,
    RunRecord,
    Series,
    SeriesKey,
)
from pytest_gpuperf.model import OpProfile, OpStat, ProfileDiff
from pytest_gpuperf.profiling.diff import diff_profiles
from pytest_gpuperf.report.codec import to_json


def extra_op_diff() -> ProfileDiff:
    """A small MLP's forward pass on the CPU with an extra GELU (and the copy feeding it), profiled calls
    around each time: the profile diff a results file carries, as real ``diff_profiles`` makes it."""
    jitter = (0.98, 0.99, 1.0, 1.01, 1.02)

    def profile(ops: dict[str, tuple[float, float]]) -> OpProfile:
        stats = tuple(OpStat(name, "operator", calls, us * 1e3, 0.0, tuple(us * 1e3 * j for j in jitter), ())
                      for name, (calls, us) in ops.items())  # fmt: skip
        host = sum(s.host_ns for s in stats) * 1.05
        return OpProfile("cpu", profiled_calls=5, host_ns=host, ops=stats, torch="2.5.1",
                         host_samples_ns=tuple(host * j for j in jitter))  # fmt: skip

    base = {"aten::addmm": (2, 180.0), "aten::relu": (1, 12.0), "aten::copy_": (1, 6.0), "aten::linear": (2, 3.0),
            "aten::t": (2, 1.5)}  # fmt: skip
    head = {**base, "aten::copy_": (2, 12.5), "aten::gelu": (1, 412.0)}
    return diff_profiles(profile(head), profile(base), base_label="baseline 1f3c9e2",
                         head_trace="gpuperf-profiles/test_mlp.head.json",
                         base_trace="gpuperf-profiles/test_mlp.base.json")  # fmt: skip


PROFILE_DIFF = to_json(extra_op_diff())  # a results file's ProfileDiff: an extra op in a forward pass
DEVICE_CLASSES = ("nvidia-h100-80gb-hbm3", "nvidia-a100-sxm4-80gb")
STATISTICS = (("time.p50", "ns", 850_000.0), ("memory.peak_allocated", "bytes", 6.0 * 2**30))
SERIES_PER_TEST = len(DEVICE_CLASSES) * len(STATISTICS)
STEP = 0.12  # the planted regression
NOISE = 0.01  # run-to-run, relative
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Fleet:
    series: list[Series]
    changes: list[ChangePoint]
    profile_diffs: dict[str, dict[str, object]]

    @property
    def points(self) -> int:
        return sum(len(s.points) for s in self.series)


def _commit(i: int) -> str:
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def synthetic(series: int, runs: int, seed: int = 0) -> Fleet:
    """``series`` series (a multiple of four) of ``runs`` runs each, with planted steps."""
    rng = random.Random(seed)
    commits = [_commit(i) for i in range(runs)]
    dates = [(START + timedelta(hours=8 * i)).isoformat() for i in range(runs)]
    all_series, changes, diffs = [], [], {}
    for t in range(math.ceil(series / SERIES_PER_TEST)):
        test = f"tests/perf/test_model_{t // 10}.py::test_layer[{t}-bf16]"
        step_at = rng.randrange(runs // 4, runs - 2) if t % 5 == 0 else None
        for device_class in DEVICE_CLASSES:
            for statistic, unit, base in STATISTICS:
                if len(all_series) == series:
                    break
                key = SeriesKey(test, "default", statistic, device_class, "main")
                timed = statistic.startswith("time.")
                points = []
                for i in range(runs):
                    stepped = timed and step_at is not None and i >= step_at
                    value = base * (1 + STEP if stepped else 1) * (1 + rng.gauss(0, NOISE))
                    points.append(Point(
                        run_id=f"{device_class}-{i}", commit=commits[i], started_at=dates[i], commit_date=dates[i],
                        runner=f"{device_class}-runner-{i % 4}", value=value,
                        p10=value * 0.985 if timed else None, p90=value * 1.02 if timed else None, samples=80,
                        baseline_update=i % 97 == 0, has_profile_diff=timed and i == step_at,
                    ))  # fmt: skip
                s = Series(key, unit, "lower", tuple(points))
                all_series.append(s)
                if timed and step_at is not None:
                    before, after = base, base * (1 + STEP)
                    changes.append(ChangePoint(
                        key=key, last_good=commits[step_at - 1], first_bad=commits[step_at], index=step_at,
                        before=before, after=after, change=STEP, ci_low=STEP - 0.01, ci_high=STEP + 0.01,
                        p_value=1e-9, kind=ChangeKind.REGRESSION, runs_after=runs - step_at,
                    ))  # fmt: skip
                    diffs[diff_key(points[step_at].run_id, key)] = PROFILE_DIFF
    return Fleet(all_series, changes, diffs)


@dataclass(frozen=True)
class Build:
    runs: int
    series: int
    points: int
    seconds: float  # wall clock
    cpu_seconds: float  # the process's CPU time (all threads): steadier than the wall clock on a shared machine
    files: int
    bytes: int

    @property
    def us_per_point(self) -> float:
        """Wall time per point."""
        return self.seconds / self.points * 1e6

    @property
    def bytes_per_point(self) -> float:
        return self.bytes / self.points


def warm_up(work: Path) -> None:
    """One small untimed build: the first size should not pay for importing matplotlib and the rest."""
    fleet = synthetic(SERIES_PER_TEST * 5, 8)
    build_site(fleet.series, fleet.changes, work / "warm-up", profile_diffs=fleet.profile_diffs)
    shutil.rmtree(work / "warm-up", ignore_errors=True)


def measure(series: int, runs: int, repeat: int, work: Path) -> Build:
    fleet = synthetic(series, runs)
    best, best_cpu = math.inf, math.inf
    out = work / f"site-{runs}"
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        started, cpu = time.perf_counter(), time.process_time()
        build_site(fleet.series, fleet.changes, out, title="Scale", profile_diffs=fleet.profile_diffs)
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    files = [p for p in out.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    return Build(runs, len(fleet.series), fleet.points, best, best_cpu, len(files), size)


def runs_of(fleet: Fleet) -> list[RunRecord]:
    """The fleet's points as the measuring sessions that recorded them: one run per device class and commit."""
    members: dict[str, list[tuple[Series, Point]]] = {}
    for s in fleet.series:
        for p in s.points:
            members.setdefault(p.run_id, []).append((s, p))
    runs = []
    for run_id, values in members.items():
        first, point = values[0]
        recorded = tuple(
            RecordedValue(
                test=s.key.test, measurement=s.key.measurement, statistic=s.key.statistic, value=p.value,
                unit=s.unit, better=s.better, p10=p.p10, p90=p.p90, samples=p.samples,
                profile_diff=fleet.profile_diffs.get(diff_key(p.run_id, s.key)) if p.has_profile_diff else None,
            )
            for s, p in values
        )  # fmt: skip
        runs.append(RunRecord(
            run_id=run_id, commit=point.commit, branch=first.key.branch, started_at=point.started_at,
            runner=point.runner, device_class=first.key.device_class, mode="baseline",
            environment={"torch": "2.13.0", "gpu_count": 8}, values=recorded, commit_date=point.commit_date,
            baseline_update=point.baseline_update,
        ))  # fmt: skip
    return runs


@dataclass(frozen=True)
class StoreSteps:
    store: str
    runs: int
    points: int
    ingest_s: float
    changes_s: float
    dashboard_s: float  # the whole command: read, detect, build
    site_s: float  # of it, build_site
    change_points: int  # found by `gpuperf history changes`
    planted: int


def _gpuperf(*args: str) -> None:
    """``gpuperf ARGS`` in this process; the exit code 1 of ``changes`` (a recent regression) is expected."""
    from pytest_gpuperf.cli import main as gpuperf

    out, err = io.StringIO(), io.StringIO()
    code = gpuperf(list(args), stdout=out, stderr=err)
    if code not in (0, 1):
        raise RuntimeError(f"gpuperf {' '.join(args[:2])} exited {code}: {err.getvalue()[-2000:]}")


def measure_store(kind: str, url: str, fleet: Fleet, runs: int, work: Path) -> StoreSteps:
    from pytest_gpuperf.history.store import open_store

    records = runs_of(fleet)
    started = time.perf_counter()
    with open_store(url) as store:
        for record in records:
            store.record(record)
    ingest = time.perf_counter() - started
    changes_file = work / f"changes-{kind}-{runs}.json"
    started = time.perf_counter()
    _gpuperf("history", "changes", "--history", url, "--format", "json", "--output", str(changes_file))
    changes = time.perf_counter() - started
    site = work / f"store-site-{kind}-{runs}"
    with _timed_build_site() as site_s:
        started = time.perf_counter()
        _gpuperf("history", "dashboard", "--history", url, "--out", str(site))
        dashboard = time.perf_counter() - started
    found = len(json.loads(changes_file.read_text()))
    return StoreSteps(kind, runs, fleet.points, ingest, changes, dashboard, sum(site_s), found, len(fleet.changes))


@contextlib.contextmanager
def _timed_build_site() -> Iterator[list[float]]:
    """The seconds the command spends in ``build_site`` (it imports the function when it runs)."""
    import pytest_gpuperf.history.dashboard as package

    spent: list[float] = []
    original = package.build_site

    def timed(*args: Any, **kwargs: Any) -> Path:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    package.build_site = timed  # type: ignore[assignment]
    try:
        yield spent
    finally:
        package.build_site = original


@contextlib.contextmanager
def store_urls(
    kinds: Sequence[str], work: Path
) -> Iterator[Callable[[str, int], contextlib.AbstractContextManager[str]]]:
    """A function giving a fresh, empty store's URL per (kind, runs); a PostgreSQL server while needed."""
    server_url, server = os.environ.get("GPUPERF_BENCH_POSTGRES"), None
    if "postgresql" in kinds and not server_url:
        server = shared_test_helper("postgres_server").ThrowawayServer()
        server.start()
        server_url = server.url

    @contextlib.contextmanager
    def fresh(kind: str, runs: int) -> Iterator[str]:
        if kind == "sqlite":
            yield f"sqlite:///{work / f'history-{runs}.db'}"
            return
        assert server_url is not None
        with shared_test_helper("postgres_server").fresh_database(server_url) as url:
            yield url

    try:
        yield fresh
    finally:
        if server is not None:
            server.stop()


def growth(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The exponent k of ``y ~ x^k`` fitted by least squares on the logs."""
    import numpy as np

    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--series", type=int, default=500)
    parser.add_argument("--runs", default="125,250,500,1000", help="comma-separated numbers of runs per series")
    parser.add_argument("--repeat", type=int, default=1, help="builds per size; the fastest counts")
    parser.add_argument("--keep", type=Path, help="build into this folder and keep the sites")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--store",
        action="append",
        choices=("sqlite", "postgresql"),
        default=[],
        help="also time ingest, changes and the dashboard from a store of this kind (repeatable)",
    )
    parser.add_argument("--store-runs", default=None, help="the numbers of runs for the stores (default: --runs)")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.runs.split(",")]
    work = args.keep or Path(tempfile.mkdtemp(prefix="gpuperf-dashboard-scale-"))
    builds = []
    warm_up(work)
    print(f"{'runs':>6} {'series':>6} {'points':>9} {'wall s':>7} {'CPU s':>7} {'us/point':>9} {'files':>6} "
          f"{'MB':>8} {'B/point':>8}")  # fmt: skip
    try:
        for runs in sizes:
            b = measure(args.series, runs, args.repeat, work)
            builds.append(b)
            print(f"{b.runs:>6} {b.series:>6} {b.points:>9} {b.seconds:>7.2f} {b.cpu_seconds:>7.2f} "
                  f"{b.us_per_point:>9.1f} {b.files:>6} {b.bytes / 1e6:>8.1f} {b.bytes_per_point:>8.1f}",
                  flush=True)  # fmt: skip
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    if len(builds) > 1:
        runs = [b.runs for b in builds]
        k_wall, k_cpu = growth(runs, [b.seconds for b in builds]), growth(runs, [b.cpu_seconds for b in builds])
        k_size = growth(runs, [b.bytes for b in builds])
        print(f"growth with the number of runs (1.00 = linear): wall time ~ runs^{k_wall:.2f}, "
              f"CPU time ~ runs^{k_cpu:.2f}, size ~ runs^{k_size:.2f}")  # fmt: skip
        # what one more point costs between consecutive sizes: flat or falling is linear or better
        for a, b in itertools.pairwise(builds):
            added = b.points - a.points
            print(f"from {a.runs} to {b.runs} runs: +{(b.cpu_seconds - a.cpu_seconds) / added * 1e6:.1f} us CPU "
                  f"and +{(b.bytes - a.bytes) / added:.0f} B per added point")  # fmt: skip
    steps = stores(args, work) if args.store else []
    if args.json:
        args.json.write_text(json.dumps({"builds": [b.__dict__ for b in builds], "stores": [s.__dict__ for s in steps]},
                                        indent=2))  # fmt: skip
    return 0


def stores(args: argparse.Namespace, work: Path) -> list[StoreSteps]:
    sizes = [int(n) for n in (args.store_runs or args.runs).split(",")]
    print(f"\n{'store':>10} {'runs':>6} {'points':>9} {'ingest s':>9} {'changes s':>10} {'dashboard s':>12} "
          f"{'site s':>7} {'found':>6} {'planted':>8}")  # fmt: skip
    steps = []
    work.mkdir(parents=True, exist_ok=True)
    with store_urls(args.store, work) as fresh:
        for kind in args.store:
            for runs in sizes:
                fleet = synthetic(args.series, runs)
                with fresh(kind, runs) as url:
                    s = measure_store(kind, url, fleet, runs, work)
                steps.append(s)
                print(f"{s.store:>10} {s.runs:>6} {s.points:>9} {s.ingest_s:>9.2f} {s.changes_s:>10.2f} "
                      f"{s.dashboard_s:>12.2f} {s.site_s:>7.2f} {s.change_points:>6} {s.planted:>8}",
                      flush=True)  # fmt: skip
            mine = [s for s in steps if s.store == kind]
            if len(mine) > 1:
                xs = [s.runs for s in mine]
                print(f"{kind}: growth with the number of runs (1.00 = linear): ingest ~ runs^"
                      f"{growth(xs, [s.ingest_s for s in mine]):.2f}, changes ~ runs^"
                      f"{growth(xs, [s.changes_s for s in mine]):.2f}, dashboard ~ runs^"
                      f"{growth(xs, [s.dashboard_s for s in mine]):.2f} (of it the site ~ runs^"
                      f"{growth(xs, [s.site_s for s in mine]):.2f})")  # fmt: skip
    return steps


if __name__ == "__main__":
    raise SystemExit(main())
