"""How often a shared CPU runner has slow spells that the scheduler does not see, and how long they last.

A call that waited in a run queue is slower by that wait, and Linux accounts for it exactly, per
thread (``/proc/thread-self/schedstat``: time on a CPU, time waiting in a run queue, timeslices).
Wall time minus that wait is what the call would have taken with the CPU to itself, unless the
machine itself ran slower: a neighbour on the same host taking memory bandwidth or the shared
cache, a hypervisor's throttling. Such spells are invisible to the guest's counters; a baseline
needs a reference measured at the same time to tell them from slower code. This script measures
how often they happen, how long they last, and which kinds of work they slow together.

One process, for ``--minutes`` (default 10), alternates short timed readings (``--reading-ms``,
about 2 ms: a block of calls) of several workloads, a round every ``--interval-ms``:

- ``python``: interpreter-bound Python (object creation, attribute and dict work, method calls);
- ``stream``: a memory-bound numpy copy walking a buffer twice the last-level cache;
- ``blas``: single-threaded BLAS (numpy matmuls of 128x128; the thread variables set to 1 first);
- ``cache``: elementwise numpy on 256 KiB arrays, resident in a core's cache;
- ``pydantic_validate``, ``pydantic_schema``: a model's validation and a model's creation (schema
  generation), when pydantic imports: run the script with the Python of pydantic_suite.py's
  environment (``CACHE/venv/bin/python``) to have them.

Each reading records its wall time; the thread's run-queue wait, time on a CPU and timeslices
(schedstat, read around the timed block through one file descriptor, ``os.pread`` re-reading it)
and its CPU time (``time.thread_time_ns``, exact where schedstat's on-CPU time lags a tick); the
machine's steal (``/proc/stat``) and CPU pressure (``/proc/pressure/cpu``, PSI) over it; and when
it started. The garbage collector runs between rounds, not inside a reading.

The analysis takes each workload's corrected time (wall minus run-queue wait) over its quiet
readings (a wait of at most ``--max-wait`` of the wall time and no steal) and its level, a low
quantile (``--baseline-quantile``, default its 10th percentile over the run). A spell is at least
``--min-readings`` consecutive quiet readings slower than the level by more than ``--threshold``
(default 20%), no two more than ``--max-gap-s`` apart. Printed: per workload, its spells (count,
median, p90 and longest duration, the share of the run in spells); the co-movement (while X is
in a spell, the others' median corrected time inside X's spells over outside them, and the
correlation of the workloads' log corrected times in 1 s bins); and each minute's median
corrected time over the level, beside the share of readings that waited and the CPU pressure.

    python benchmarks/slow_spells.py --minutes 10 --json benchmarks/results/slow_spells_DATE.json
    python benchmarks/slow_spells.py --from-json benchmarks/results/slow_spells_DATE.json --threshold 0.3

The raw readings go to ``--json``, so ``--from-json`` re-analyses them with other settings.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import gzip
import json
import math
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "pytest-gpuperf-slow-spells"
# Version history: 1, the first: columns of readings, workloads, load averages, settings.
VERSION = 1
# BLAS and OpenMP pools read these when numpy loads: one thread, so the blas workload is one core's.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
COLUMNS = ("workload", "start_ns", "wall_ns", "wait_ns", "oncpu_ns", "cpu_ns", "slices", "steal_ticks",
           "psi_some_us", "psi_full_us")  # fmt: skip
GC_EVERY_S = 1.0
LOAD_EVERY_S = 5.0
TIME_DIGITS = -2  # times kept to 100 ns (round(t, -2)): 0.005% of a reading; the raw readings compress better
STREAM_CHUNK_BYTES = 256 << 10
MIN_STREAM_BYTES = 64 << 20  # the buffer's least size where the last-level cache is not known


# --- the measurement -------------------------------------------------------------------------------


@dataclass
class Workload:
    """A kind of work: ``run(n)`` does ``n`` units; ``units`` is set so that a reading lasts about its target."""

    name: str
    what: str
    run: Callable[[int], None]
    units: int = 1


class _Record:
    def __init__(self, key: str, value: int) -> None:
        self.key = key
        self.value = value

    def weight(self) -> int:
        return self.value * 3 + len(self.key)


_KEYS = tuple(f"key{i}" for i in range(64))


def python_unit(n: int) -> None:
    """Interpreter-bound: objects, attributes, a dict and method calls, nothing numpy."""
    table: dict[str, int] = {}
    for i in range(n * 16):
        record = _Record(_KEYS[i & 63], i)
        table[record.key] = table.get(record.key, 0) + record.weight()


def last_level_cache_bytes() -> int | None:
    """The largest cache of CPU 0 as sysfs gives it (``491520K``), or None where sysfs lacks it."""
    caches = Path("/sys/devices/system/cpu/cpu0/cache")
    sizes = []
    for index in caches.glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * scale)
    return max(sizes) if sizes else None


def make_workloads(stream_bytes: int) -> list[Workload]:
    """The workloads, numpy imported here (after :func:`limit_threads`), pydantic's where it imports;
    the stream workload copies between two buffers of ``stream_bytes`` each."""
    import numpy as np

    half = stream_bytes // 8  # float64s per buffer
    source, target = np.ones(half), np.empty(half)
    target.fill(0.0)  # every page touched now, not by the first readings
    chunk = STREAM_CHUNK_BYTES // 8
    position = [0]

    def stream(n: int) -> None:
        for _ in range(n):
            start = position[0]
            np.copyto(target[start : start + chunk], source[start : start + chunk])
            position[0] = start + chunk if start + 2 * chunk <= half else 0

    rng = np.random.default_rng(0)
    a, b, c = rng.random((128, 128)), rng.random((128, 128)), np.empty((128, 128))

    def blas(n: int) -> None:
        for _ in range(n):
            np.matmul(a, b, out=c)

    x, y = rng.random(32768), np.empty(32768)  # 256 KiB each: in a core's cache

    def cache(n: int) -> None:
        for _ in range(n):
            np.multiply(x, 1.000001, out=y)
            np.add(y, x, out=y)

    workloads = [
        Workload("python", "objects, attributes, a dict, method calls (interpreter-bound)", python_unit),
        Workload("stream", f"numpy copy walking 2 x {half * 8 >> 20} MiB (memory-bound)", stream),
        Workload("blas", "numpy matmul 128x128 float64, one thread (BLAS-bound)", blas),
        Workload("cache", "numpy multiply and add on 256 KiB arrays (cache-resident)", cache),
    ]
    return workloads + pydantic_workloads()


def pydantic_workloads() -> list[Workload]:
    """A model's validation and a model's creation (schema generation), where pydantic is installed."""
    try:
        import pydantic
    except ImportError:
        return []

    class Item(pydantic.BaseModel):
        name: str
        price: float
        tags: list[str]

    class Order(pydantic.BaseModel):
        id: int
        items: list[Item]
        note: str | None = None

    data = {"id": 1, "items": [{"name": f"n{i}", "price": i * 1.5, "tags": ["a", "b"]} for i in range(4)]}

    def validate(n: int) -> None:
        for _ in range(n):
            Order.model_validate(data)

    def schema(n: int) -> None:
        for _ in range(n):
            pydantic.create_model("Made", a=(int, ...), b=(str, "x"), c=(list[float], ...), d=(Item | None, None))

    return [
        Workload("pydantic_validate", f"pydantic {pydantic.VERSION}: Order.model_validate, 4 nested items", validate),
        Workload(
            "pydantic_schema", f"pydantic {pydantic.VERSION}: create_model of 4 fields (schema generation)", schema
        ),
    ]


def limit_threads() -> None:
    """One BLAS/OpenMP thread, set before numpy is imported (the environment's own setting kept)."""
    for variable in THREAD_VARIABLES:
        os.environ.setdefault(variable, "1")


def calibrate(workload: Workload, target_ns: int) -> None:
    """Sets ``units`` so that a reading takes about ``target_ns``: the quickest of three tries per size."""
    units = 1
    while True:
        best = min(_timed(workload.run, units) for _ in range(3))
        if best >= target_ns // 4 or units >= 1 << 24:
            break
        units *= 2
    workload.units = max(1, round(units * target_ns / max(best, 1)))


def _timed(run: Callable[[int], None], units: int) -> int:
    started = time.perf_counter_ns()
    run(units)
    return time.perf_counter_ns() - started


class Counters:
    """The thread's schedstat and the machine's steal and CPU pressure, each file opened once and re-read."""

    def __init__(self) -> None:
        self._schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        self._stat = _open_optional("/proc/stat")
        self._pressure = _open_optional("/proc/pressure/cpu")

    def thread(self) -> tuple[int, int, int]:
        """On-CPU ns, run-queue wait ns, timeslices of the calling thread."""
        oncpu, wait, slices = os.pread(self._schedstat, 64, 0).split()[:3]
        return int(oncpu), int(wait), int(slices)

    def steal(self) -> int:
        """The machine's steal time in clock ticks (``/proc/stat``'s first line, its eighth number); 0 where absent."""
        if self._stat is None:
            return 0
        fields = os.pread(self._stat, 256, 0).split(b"\n", 1)[0].split()
        return int(fields[8]) if len(fields) > 8 else 0

    def pressure(self) -> tuple[int, int]:
        """PSI CPU totals in us, some and full; 0 where the kernel has no PSI."""
        if self._pressure is None:
            return 0, 0
        lines = os.pread(self._pressure, 256, 0).decode().splitlines()
        totals = [int(line.rsplit("total=", 1)[1]) for line in lines if "total=" in line]
        some, full = [*totals, 0, 0][:2]
        return some, full

    def close(self) -> None:
        for fd in (self._schedstat, self._stat, self._pressure):
            if fd is not None:
                os.close(fd)


def _open_optional(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


def take_readings(workloads: Sequence[Workload], seconds: float, interval_ns: int) -> dict[str, Any]:
    """Rounds of one reading per workload until ``seconds`` are spent: the columns of :data:`COLUMNS`,
    and the load average every :data:`LOAD_EVERY_S`."""
    counters = Counters()
    columns: dict[str, list[int]] = {name: [] for name in COLUMNS}
    loads: list[list[float]] = []
    gc.disable()  # collected between rounds, so that no reading carries a collection
    start = time.perf_counter_ns()
    end = start + int(seconds * 1e9)
    next_round = start
    last_gc = last_load = start - int(LOAD_EVERY_S * 1e9)
    try:
        while (now := time.perf_counter_ns()) < end:
            if now - last_load >= LOAD_EVERY_S * 1e9:
                loads.append([round((now - start) / 1e9, 2), os.getloadavg()[0]])
                last_load = now
            for index, workload in enumerate(workloads):
                steal, (some, full) = counters.steal(), counters.pressure()
                oncpu, wait, slices = counters.thread()
                cpu = time.thread_time_ns()
                began = time.perf_counter_ns()
                workload.run(workload.units)
                ended = time.perf_counter_ns()
                cpu_after = time.thread_time_ns()
                oncpu_after, wait_after, slices_after = counters.thread()
                some_after, full_after = counters.pressure()
                times = (began - start, ended - began, wait_after - wait, oncpu_after - oncpu, cpu_after - cpu)
                row = (index, *(round(t, TIME_DIGITS) for t in times), slices_after - slices, counters.steal() - steal,
                       some_after - some, full_after - full)  # fmt: skip
                for name, value in zip(COLUMNS, row, strict=True):
                    columns[name].append(value)
            if time.perf_counter_ns() - last_gc >= GC_EVERY_S * 1e9:
                gc.collect()
                last_gc = time.perf_counter_ns()
            next_round += interval_ns
            pause = next_round - time.perf_counter_ns()
            if pause > 0:
                time.sleep(pause / 1e9)
            else:
                next_round = time.perf_counter_ns()  # behind: no burst of rounds to catch up
    finally:
        gc.enable()
        counters.close()
    return {"columns": columns, "load": loads, "seconds": (time.perf_counter_ns() - start) / 1e9}


# --- the analysis ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """What makes a reading quiet and a stretch of readings a spell."""

    threshold: float = 0.20  # slower than the level by more than this
    min_readings: int = 5  # consecutive slow quiet readings that make a spell
    max_wait: float = 0.02  # quiet: run-queue wait at most this share of the wall time, and no steal
    baseline_quantile: float = 0.10  # the level: this quantile of the quiet corrected times
    max_gap_s: float = 1.0  # quiet readings further apart than this do not continue a spell
    bin_s: float = 1.0  # the bins of the correlation
    step_s: float = 60.0  # the rows of the over-time table


@dataclass(frozen=True)
class Reading:
    start_s: float
    wall_ns: int
    wait_ns: int
    steal_ticks: int = 0
    psi_some_us: int = 0

    @property
    def corrected_ns(self) -> int:
        """Wall time less the run-queue wait: the time with the CPU to itself."""
        return self.wall_ns - self.wait_ns

    def quiet(self, settings: Settings) -> bool:
        return self.wait_ns <= settings.max_wait * self.wall_ns and self.steal_ticks == 0


@dataclass(frozen=True)
class Spell:
    workload: str
    start_s: float
    end_s: float
    readings: int
    median_ratio: float  # the spell's median corrected time over the level

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def series(data: dict[str, Any]) -> dict[str, list[Reading]]:
    """Each workload's readings in time order, from a results document's columns."""
    names = [w["name"] for w in data["workloads"]]
    columns = data["readings"]
    by_name: dict[str, list[Reading]] = {name: [] for name in names}
    for i, index in enumerate(columns["workload"]):
        by_name[names[index]].append(
            Reading(columns["start_ns"][i] / 1e9, columns["wall_ns"][i], columns["wait_ns"][i],
                    columns["steal_ticks"][i], columns["psi_some_us"][i])
        )  # fmt: skip
    return by_name


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile by linear interpolation (numpy's default); ``values`` need not be sorted."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def level(readings: Sequence[Reading], settings: Settings) -> float | None:
    """The workload's level: the baseline quantile of its quiet corrected times (None with no quiet reading)."""
    quiet = [r.corrected_ns for r in readings if r.quiet(settings)]
    return quantile(quiet, settings.baseline_quantile) if quiet else None


def find_spells(name: str, readings: Sequence[Reading], settings: Settings) -> list[Spell]:
    """The stretches of at least ``min_readings`` consecutive quiet readings slower than the level by more
    than the threshold; a reading that waited is left out (the scheduler saw it), a gap breaks a stretch."""
    base = level(readings, settings)
    if base is None:
        return []
    spells: list[Spell] = []
    run: list[Reading] = []

    def close() -> None:
        if len(run) >= settings.min_readings:
            ratios = [r.corrected_ns / base for r in run]
            end = run[-1].start_s + run[-1].wall_ns / 1e9
            spells.append(Spell(name, run[0].start_s, end, len(run), statistics.median(ratios)))
        run.clear()

    for reading in readings:
        if not reading.quiet(settings):
            continue
        if run and reading.start_s - run[-1].start_s > settings.max_gap_s:
            close()
        if reading.corrected_ns > (1 + settings.threshold) * base:
            run.append(reading)
        else:
            close()
    close()
    return spells


def _inside(t: float, starts: Sequence[float], spells: Sequence[Spell]) -> bool:
    """Whether ``t`` falls in one of ``spells`` (one workload's: in time order, not overlapping; ``starts``
    their start times)."""
    i = bisect.bisect_right(starts, t) - 1
    return i >= 0 and t <= spells[i].end_s


def co_movement(by_name: dict[str, list[Reading]], spells: dict[str, list[Spell]],
                settings: Settings) -> dict[str, dict[str, float | None]]:  # fmt: skip
    """For each workload X with spells and each workload Y: Y's median quiet corrected time inside X's
    spells over its median outside them (None where Y has no quiet reading on either side)."""
    table: dict[str, dict[str, float | None]] = {}
    for x, x_spells in spells.items():
        if not x_spells:
            continue
        row: dict[str, float | None] = {}
        starts = [s.start_s for s in x_spells]
        for y, readings in by_name.items():
            quiet = [r for r in readings if r.quiet(settings)]
            inside = [r.corrected_ns for r in quiet if _inside(r.start_s, starts, x_spells)]
            outside = [r.corrected_ns for r in quiet if not _inside(r.start_s, starts, x_spells)]
            row[y] = statistics.median(inside) / statistics.median(outside) if inside and outside else None
        table[x] = row
    return table


def binned_logs(readings: Sequence[Reading], settings: Settings) -> dict[int, float]:
    """The median log corrected time of the quiet readings in each bin of ``bin_s`` seconds."""
    bins: dict[int, list[float]] = {}
    for r in readings:
        if r.quiet(settings) and r.corrected_ns > 0:
            bins.setdefault(int(r.start_s // settings.bin_s), []).append(math.log(r.corrected_ns))
    return {b: statistics.median(values) for b, values in bins.items()}


PairMeasure = Callable[[list[float], list[float]], float | None]


def pairwise(
    by_name: dict[str, list[Reading]], settings: Settings, measure: PairMeasure
) -> dict[str, dict[str, float | None]]:
    """``measure`` of each pair's binned log corrected times over the bins both have (None with fewer than three)."""
    binned = {name: binned_logs(readings, settings) for name, readings in by_name.items()}
    table: dict[str, dict[str, float | None]] = {}
    for x in binned:
        table[x] = {}
        for y in binned:
            common = sorted(binned[x].keys() & binned[y].keys())
            xs, ys = [binned[x][b] for b in common], [binned[y][b] for b in common]
            table[x][y] = measure(xs, ys) if len(common) >= 3 else None
    return table


def correlation(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's correlation; None for a constant series (statistics.correlation can miss one by a rounding error)."""
    return statistics.correlation(xs, ys) if max(xs) > min(xs) and max(ys) > min(ys) else None


def reference_spread(xs: list[float], ys: list[float]) -> float | None:
    """The spread of ``xs`` less ``ys`` over the spread of ``xs`` (standard deviations; None when ``xs`` is
    constant): below 1, dividing by the second workload's time removes some of the first's variation."""
    spread = statistics.stdev(xs)
    return statistics.stdev([x - y for x, y in zip(xs, ys, strict=True)]) / spread if spread > 0 else None


def correlations(by_name: dict[str, list[Reading]], settings: Settings) -> dict[str, dict[str, float | None]]:
    """Pearson's correlation of each pair's binned log corrected times."""
    return pairwise(by_name, settings, correlation)


def over_time(by_name: dict[str, list[Reading]], settings: Settings) -> list[dict[str, Any]]:
    """Per step of ``step_s``: each workload's median quiet corrected time over its level, the share of
    readings that were not quiet, and the CPU pressure (PSI some) as a share of the step's reading time."""
    levels = {name: level(readings, settings) for name, readings in by_name.items()}
    steps: dict[int, dict[str, Any]] = {}
    for name, readings in by_name.items():
        for r in readings:
            step = steps.setdefault(int(r.start_s // settings.step_s), {"ratios": {}, "n": 0, "waited": 0,
                                                                         "wall_ns": 0, "psi_us": 0})  # fmt: skip
            step["n"] += 1
            step["wall_ns"] += r.wall_ns
            step["psi_us"] += r.psi_some_us
            base = levels[name]
            if not r.quiet(settings):
                step["waited"] += 1
            elif base:
                step["ratios"].setdefault(name, []).append(r.corrected_ns / base)
    return [
        {
            "start_s": index * settings.step_s,
            "ratios": {name: statistics.median(v) for name, v in sorted(step["ratios"].items())},
            "waited": step["waited"] / step["n"],
            "pressure": step["psi_us"] * 1000 / step["wall_ns"] if step["wall_ns"] else 0.0,
        }
        for index, step in sorted(steps.items())
    ]


@dataclass
class Analysis:
    settings: Settings
    seconds: float
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    spells: list[Spell] = field(default_factory=list)
    co_movement: dict[str, dict[str, float | None]] = field(default_factory=dict)
    correlations: dict[str, dict[str, float | None]] = field(default_factory=dict)
    reference_spreads: dict[str, dict[str, float | None]] = field(default_factory=dict)
    over_time: list[dict[str, Any]] = field(default_factory=list)


def analyse(data: dict[str, Any], settings: Settings) -> Analysis:
    by_name = series(data)
    found = {name: find_spells(name, readings, settings) for name, readings in by_name.items()}
    analysis = Analysis(settings, data["seconds"])
    for name, readings in by_name.items():
        durations = sorted(s.duration_s for s in found[name])
        quiet = [r for r in readings if r.quiet(settings)]
        base = level(readings, settings)
        analysis.workloads[name] = {
            "readings": len(readings),
            "quiet": len(quiet),
            "level_us": base / 1e3 if base else None,
            "median_ratio": statistics.median(r.corrected_ns for r in quiet) / base if base else None,
            "wall_over_corrected": (
                sum(r.wall_ns for r in readings) / sum(r.corrected_ns for r in readings) if readings else None
            ),
            "spells": len(durations),
            "median_s": statistics.median(durations) if durations else None,
            "p90_s": quantile(durations, 0.9) if durations else None,
            "longest_s": durations[-1] if durations else None,
            "time_in_spells": sum(durations) / data["seconds"] if data["seconds"] else 0.0,
        }
        analysis.spells.extend(found[name])
    analysis.co_movement = co_movement(by_name, found, settings)
    analysis.correlations = correlations(by_name, settings)
    analysis.reference_spreads = pairwise(by_name, settings, reference_spread)
    analysis.over_time = over_time(by_name, settings)
    return analysis


# --- the output ------------------------------------------------------------------------------------


def _f(value: float | None, spec: str) -> str:
    """``value`` formatted by ``spec``, or a dash as wide as the spec's width where there is none."""
    if value is not None:
        return format(value, spec)
    width = spec.lstrip("+").split(".")[0]
    return format("-", f">{width}") if width.isdigit() else "-"


def render(data: dict[str, Any], analysis: Analysis) -> str:
    s = analysis.settings
    loads = [load for _, load in data.get("load", [])]
    names = list(analysis.workloads)
    lines = [
        f"{analysis.seconds / 60:.1f} min, {len(names)} workloads, {len(data['readings']['workload'])} readings"
        f" of about {data['reading_ms']} ms, a round every {data['interval_ms']} ms; "
        f"{data['machine']['cpus']} CPUs ({data['machine']['cpu']}), {data['date']}",
        f"load average: {_f(loads[0] if loads else None, '.2f')} at the start, "
        f"{_f(statistics.mean(loads) if loads else None, '.2f')} mean, {_f(max(loads) if loads else None, '.2f')} "
        f"highest, {_f(loads[-1] if loads else None, '.2f')} at the end",
        f"a spell: at least {s.min_readings} consecutive quiet readings (run-queue wait <= {s.max_wait:.0%} of wall, "
        f"no steal) over {1 + s.threshold:.2f}x the workload's level (p{s.baseline_quantile * 100:.0f} of its "
        f"quiet corrected times), none more than {s.max_gap_s:g} s apart",
        "",
        f"{'workload':<18} {'readings':>8} {'quiet':>6} {'level':>9} {'median':>7} {'wall/':>6} {'spells':>6} "
        f"{'median':>7} {'p90':>7} {'longest':>8} {'in spells':>9}",
        f"{'':<18} {'':>8} {'':>6} {'us':>9} {'ratio':>7} {'corr':>6} {'':>6} {'s':>7} {'s':>7} {'s':>8} {'':>9}",
    ]
    for name, w in analysis.workloads.items():
        lines.append(
            f"{name:<18} {w['readings']:>8} {w['quiet'] / max(w['readings'], 1):>6.0%} {_f(w['level_us'], '9.1f')} "
            f"{_f(w['median_ratio'], '7.2f')} {_f(w['wall_over_corrected'], '6.2f')} {w['spells']:>6} "
            f"{_f(w['median_s'], '7.2f')} {_f(w['p90_s'], '7.2f')} {_f(w['longest_s'], '8.2f')} "
            f"{w['time_in_spells']:>9.1%}"
        )  # fmt: skip
    width = max(len(n) for n in names) if names else 8
    lines += ["", "co-movement: while the row's workload is in a spell, the column's median quiet corrected time "
              "inside its spells over outside them"]  # fmt: skip
    lines += _table(analysis.co_movement, names, width, "5.2f")
    lines += ["", f"correlation of log corrected times in {s.bin_s:g} s bins (quiet readings)"]
    lines += _table(analysis.correlations, names, width, "+5.2f")
    lines += ["", f"as a reference: the spread of the row's log corrected time in {s.bin_s:g} s bins divided by the "
              "column's, over its own spread (below 1: the column's time tracks the row's slow spells)"]  # fmt: skip
    lines += _table(analysis.reference_spreads, names, width, "5.2f")
    lines += ["", f"over time: each {s.step_s:g} s, median quiet corrected time over the level; waited: the share of "
              "readings with a run-queue wait; psi: CPU pressure (some) over the readings"]  # fmt: skip
    lines.append(f"{'from s':>7} " + " ".join(f"{n[:9]:>9}" for n in names) + f" {'waited':>7} {'psi':>5}")
    for step in analysis.over_time:
        ratios = " ".join(f"{_f(step['ratios'].get(n), '9.2f')}" for n in names)
        lines.append(f"{step['start_s']:>7.0f} {ratios} {step['waited']:>7.0%} {step['pressure']:>5.0%}")
    return "\n".join(lines)


def _table(table: dict[str, dict[str, float | None]], names: list[str], width: int, spec: str) -> list[str]:
    if not table:
        return ["  (none)"]
    rows = [" " * (width + 1) + " ".join(f"{n[:9]:>9}" for n in names)]
    for x, row in table.items():
        rows.append(f"{x:<{width}} " + " ".join(f"{_f(row.get(y), spec):>9}" for y in names))
    return rows


def analysis_json(analysis: Analysis) -> dict[str, Any]:
    document = asdict(analysis)
    document["spells"] = [{**asdict(s), "duration_s": s.duration_s} for s in analysis.spells]
    return document


# --- the command -----------------------------------------------------------------------------------


def measure(args: argparse.Namespace) -> dict[str, Any]:
    limit_threads()
    llc = last_level_cache_bytes()
    workloads = make_workloads(args.stream_mib << 20 if args.stream_mib else max(MIN_STREAM_BYTES, llc or 0))
    target = int(args.reading_ms * 1e6)
    for workload in workloads:
        calibrate(workload, target)
    print(
        f"{len(workloads)} workloads, each reading about {args.reading_ms} ms; load average before: "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; measuring for {args.minutes} min",
        flush=True,
    )
    taken = take_readings(workloads, args.minutes * 60, int(args.interval_ms * 1e6))
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10  # KiB on Linux
    return {
        "format": FORMAT,
        "version": VERSION,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(["python", *sys.argv]),
        "executable": sys.executable,  # pydantic's workloads come from the environment it belongs to
        "machine": {
            "cpu": _cpu_model(),
            "cpus": os.cpu_count(),
            "llc_bytes": llc,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "peak_rss_bytes": peak_rss,
            "threads": {v: os.environ.get(v) for v in THREAD_VARIABLES},
        },
        "reading_ms": args.reading_ms,
        "interval_ms": args.interval_ms,
        "workloads": [{"name": w.name, "what": w.what, "units": w.units} for w in workloads],
        "seconds": taken["seconds"],
        "load": taken["load"],
        "readings": taken["columns"],
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_document(path: Path, document: dict[str, Any]) -> None:
    """Compact JSON, gzip-compressed where the name ends in ``.gz`` (ten minutes of readings: a few MB)."""
    text = json.dumps(document, separators=(",", ":"))
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as out:
            out.write(text)
    else:
        path.write_text(text)


def load_document(path: Path) -> dict[str, Any]:
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    data: dict[str, Any] = json.loads(text)
    if data.get("format") != FORMAT:
        raise SystemExit(f"{path}: not a slow_spells.py results file (format {data.get('format')!r})")
    if data.get("version") != VERSION:
        raise SystemExit(f"{path}: version {data.get('version')!r}, this script reads version {VERSION}")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to measure (default 10)")
    parser.add_argument("--reading-ms", type=float, default=2.0, help="a reading's target length (default 2)")
    parser.add_argument("--interval-ms", type=float, default=50.0, help="a round of readings every (default 50)")
    parser.add_argument(
        "--stream-mib",
        type=int,
        help="the stream workload's two buffers, MiB each (default: the last-level cache's size, at least 64)",
    )
    parser.add_argument("--json", type=Path, help="write the readings and the analysis here (.json.gz: compressed)")
    parser.add_argument("--from-json", type=Path, help="analyse the readings of an earlier --json, measure nothing")
    defaults = Settings()
    parser.add_argument("--threshold", type=float, default=defaults.threshold, help="slower than the level by")
    parser.add_argument("--min-readings", type=int, default=defaults.min_readings, help="readings in a spell, least")
    parser.add_argument("--max-wait", type=float, default=defaults.max_wait, help="quiet: wait over wall at most")
    parser.add_argument("--baseline-quantile", type=float, default=defaults.baseline_quantile, help="the level")
    parser.add_argument("--max-gap-s", type=float, default=defaults.max_gap_s, help="a longer gap breaks a spell")
    parser.add_argument("--step-s", type=float, default=defaults.step_s, help="rows of the over-time table")
    parser.add_argument("--bin-s", type=float, default=defaults.bin_s, help="bins of the correlation (default 1)")
    args = parser.parse_args(argv)
    settings = Settings(args.threshold, args.min_readings, args.max_wait, args.baseline_quantile, args.max_gap_s,
                        args.bin_s, args.step_s)  # fmt: skip
    data = load_document(args.from_json) if args.from_json else measure(args)
    analysis = analyse(data, settings)
    if args.json:
        write_document(args.json, {**data, "analysis": analysis_json(analysis)})
    print(render(data, analysis))
    if args.json:
        print(f"\nreadings and analysis written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
