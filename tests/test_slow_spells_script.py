"""benchmarks/slow_spells.py: spells found in constructed series, co-movement, the document, a short real run."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from benchmark_scripts import BENCHMARKS, benchmark_script

STEP_S = 0.05  # a round every 50 ms, as the script's default
LEVEL_NS = 2_000_000


def document(series: dict[str, list[tuple[int, int]]], seconds: float | None = None) -> dict[str, Any]:
    """A results document whose workloads have these (wall ns, wait ns) readings, one round every STEP_S."""
    columns: dict[str, list[int]] = {c: [] for c in ("workload", "start_ns", "wall_ns", "wait_ns", "oncpu_ns",
                                                     "cpu_ns", "slices", "steal_ticks", "psi_some_us",
                                                     "psi_full_us")}  # fmt: skip
    rounds = max(len(readings) for readings in series.values())
    for i in range(rounds):
        for index, readings in enumerate(series.values()):
            if i >= len(readings):
                continue
            wall, wait = readings[i]
            row = (index, round(i * STEP_S * 1e9) + index * 10_000, wall, wait, wall - wait, wall - wait,
                   int(wait > 0), 0, wait // 1000, 0)  # fmt: skip
            for name, value in zip(columns, row, strict=True):
                columns[name].append(value)
    return {
        "format": "pytest-gpuperf-slow-spells", "version": 1, "date": "2026-01-01T00:00:00+0000",
        "machine": {"cpus": 2, "cpu": "test"}, "reading_ms": 2.0, "interval_ms": STEP_S * 1000,
        "workloads": [{"name": name, "what": name, "units": 1} for name in series],
        "seconds": seconds if seconds is not None else rounds * STEP_S, "load": [[0.0, 1.0], [5.0, 3.0]],
        "readings": columns,
    }  # fmt: skip


def steady(n: int, jitter: float = 0.02) -> list[tuple[int, int]]:
    """n quiet readings within ``jitter`` of the level, deterministic."""
    return [(round(LEVEL_NS * (1 + jitter * ((i * 7) % 5) / 4)), 0) for i in range(n)]


def test_a_planted_spell_is_found_with_its_start_and_duration() -> None:
    readings = steady(200)
    readings[100:140] = [(round(LEVEL_NS * 1.4), 0)] * 40  # 2 s at 1.4x, from 5 s
    with benchmark_script("slow_spells") as script:
        spells = script.find_spells("a", script.series(document({"a": readings}))["a"], script.Settings())
    assert len(spells) == 1
    spell = spells[0]
    assert spell.readings == 40 and spell.start_s == pytest.approx(5.0)
    assert spell.duration_s == pytest.approx(39 * STEP_S + 1.4 * LEVEL_NS / 1e9)
    assert spell.median_ratio == pytest.approx(1.4, rel=0.001)  # the level: p10 of the quiet readings, 2.0 ms


def test_wait_is_subtracted_readings_that_waited_are_left_out_and_short_runs_are_no_spell() -> None:
    readings = steady(300)
    readings[20:60] = [(2 * LEVEL_NS, LEVEL_NS)] * 40  # twice as slow, all of it run-queue wait: the scheduler saw it
    readings[100:104] = [(round(LEVEL_NS * 1.5), 0)] * 4  # four slow readings: under the five a spell needs
    # slow and quiet, interleaved with slow readings that waited: the waited ones are skipped, not breaking it
    readings[150:170] = [(round(LEVEL_NS * 1.5), 0) if i % 2 else (3 * LEVEL_NS, LEVEL_NS) for i in range(20)]
    readings[200:206] = [(round(LEVEL_NS * 1.5), 0)] * 6
    with benchmark_script("slow_spells") as script:
        by_name = script.series(document({"a": readings}))
        settings = script.Settings()
        spells = script.find_spells("a", by_name["a"], settings)
        gapped = [r for i, r in enumerate(by_name["a"]) if not 203 <= i < 230]  # 1.35 s without a reading
        split = script.find_spells("a", gapped, settings)
    assert [(round(s.start_s, 2), s.readings) for s in spells] == [(7.55, 10), (10.0, 6)]
    # the same six slow readings with a gap of more than max_gap_s inside: two runs of three, no spell
    assert [(round(s.start_s, 2), s.readings) for s in split] == [(7.55, 10)]


def test_co_movement_is_the_others_median_inside_the_spells_over_outside() -> None:
    a, b, c = steady(200, jitter=0.0), steady(200, jitter=0.0), steady(200, jitter=0.0)
    a[50:90] = [(round(LEVEL_NS * 1.5), 0)] * 40
    b[50:90] = [(round(LEVEL_NS * 1.25), 0)] * 40  # slower by 25% while a is in its spell
    with benchmark_script("slow_spells") as script:
        analysis = script.analyse(document({"a": a, "b": b, "c": c}), script.Settings(bin_s=1.0))
    assert analysis.workloads["a"]["spells"] == 1 and analysis.workloads["b"]["spells"] == 1
    assert analysis.co_movement["a"]["b"] == pytest.approx(1.25)
    assert analysis.co_movement["a"]["a"] == pytest.approx(1.5) and analysis.co_movement["a"]["c"] == 1.0
    assert "c" not in analysis.co_movement  # no spell of its own
    # a and b move together in the 1 s bins; c is constant: no correlation to speak of
    assert analysis.correlations["a"]["b"] == pytest.approx(1.0)
    assert analysis.correlations["a"]["c"] is None
    assert analysis.workloads["a"]["time_in_spells"] == pytest.approx(analysis.spells[0].duration_s / 10.0)


def test_correlation_is_pearsons_of_the_binned_log_times() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0, 0.1, 40)
    y = 0.5 * x + rng.normal(0, 0.05, 40)
    # one reading per 1 s bin, so that each bin's median is the reading itself
    series = {
        "x": [(round(LEVEL_NS * math.exp(v)), 0) for v in x],
        "y": [(round(LEVEL_NS * math.exp(v)), 0) for v in y],
    }
    data = document(series)
    data["readings"]["start_ns"] = [round(i // 2 * 1e9) + (i % 2) * 1000 for i in range(80)]
    with benchmark_script("slow_spells") as script:
        table = script.correlations(script.series(data), script.Settings())
    expected = np.corrcoef(np.log(np.round(LEVEL_NS * np.exp(x))), np.log(np.round(LEVEL_NS * np.exp(y))))[0, 1]
    assert table["x"]["y"] == pytest.approx(expected) and table["y"]["x"] == pytest.approx(expected)


def test_a_reference_that_tracks_the_slow_spells_takes_them_out() -> None:
    x = [0.0, 0.2, 0.1, 0.4, 0.0, 0.3]
    with benchmark_script("slow_spells") as script:
        assert script.reference_spread(x, [v + 1.0 for v in x]) == pytest.approx(
            0.0, abs=1e-12
        )  # tracks every move: nothing left
        assert script.reference_spread(x, [0.5] * 6) == pytest.approx(1.0)  # a constant reference changes nothing
        assert script.reference_spread(x, [-v for v in x]) == pytest.approx(2.0)  # moving the other way doubles it
        assert script.reference_spread([0.1] * 6, x) is None


def test_quantile_is_numpys_linear_interpolation() -> None:
    values = [5.0, 1.0, 3.5, 2.0, 9.0, 4.0, 7.5]
    with benchmark_script("slow_spells") as script:
        for q in (0.0, 0.1, 0.5, 0.9, 1.0):
            assert script.quantile(values, q) == pytest.approx(float(np.quantile(values, q)))


def test_over_time_gives_each_step_its_ratios_and_share_of_waiting() -> None:
    a = steady(240, jitter=0.0)
    a[120:180] = [(round(LEVEL_NS * 1.3), 0)] * 60  # the second step (6-12 s) slower for half its readings
    a[0:12] = [(2 * LEVEL_NS, LEVEL_NS)] * 12  # the first step's first tenth waited
    with benchmark_script("slow_spells") as script:
        steps = script.over_time(script.series(document({"a": a})), script.Settings(step_s=6.0))
    assert [s["start_s"] for s in steps] == [0.0, 6.0]
    assert steps[0]["waited"] == pytest.approx(0.1) and steps[1]["waited"] == 0.0
    assert steps[0]["ratios"]["a"] == 1.0 and steps[1]["ratios"]["a"] == pytest.approx(1.15)


def test_the_document_is_written_compressed_and_reanalysed_from_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readings = steady(200)
    readings[100:140] = [(round(LEVEL_NS * 1.4), 0)] * 40
    path = tmp_path / "spells.json.gz"
    with benchmark_script("slow_spells") as script:
        script.write_document(path, document({"python": readings, "stream": steady(200)}))
        assert path.read_bytes()[:2] == b"\x1f\x8b"  # gzip
        assert script.main(["--from-json", str(path), "--step-s", "5"]) == 0
        out = capsys.readouterr().out
        assert script.main(["--from-json", str(path), "--threshold", "0.5"]) == 0
        stricter = capsys.readouterr().out
        (tmp_path / "other.json").write_text('{"format": "something else"}')
        with pytest.raises(SystemExit, match=r"not a slow_spells\.py results file"):
            script.load_document(tmp_path / "other.json")
    row = next(line for line in out.splitlines() if line.startswith("python "))
    assert row.split()[6] == "1"  # one spell
    assert "co-movement" in out and "load average: 1.00 at the start, 2.00 mean, 3.00 highest" in out
    assert next(line for line in stricter.splitlines() if line.startswith("python ")).split()[6] == "0"


@pytest.mark.skipif(not Path("/proc/thread-self/schedstat").exists(), reason="needs Linux's per-thread schedstat")
def test_a_short_run_records_every_column_for_every_workload(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "slow_spells.py"), "--minutes", "0.02", "--interval-ms",
                           "20", "--reading-ms", "1", "--stream-mib", "8", "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    with benchmark_script("slow_spells") as script:
        data = script.load_document(out)
    names = [w["name"] for w in data["workloads"]]
    assert names[:4] == ["python", "stream", "blas", "cache"]
    columns = data["readings"]
    count = len(columns["workload"])
    assert count >= len(names) and all(len(values) == count for values in columns.values())
    assert set(columns["workload"]) == set(range(len(names)))
    assert all(w > 0 for w in columns["wall_ns"]) and all(q >= 0 for q in columns["wait_ns"])
    assert all(c > 0 for c in columns["cpu_ns"]) and columns["start_ns"] == sorted(columns["start_ns"])
    assert data["machine"]["threads"]["OPENBLAS_NUM_THREADS"] == "1"
    assert "co-movement" in done.stdout and "analysis" in data
