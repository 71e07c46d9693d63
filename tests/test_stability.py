"""A runner's stability for baseline mode: the spread limit, the spread of real sessions, ``gpuperf stability``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cli_helpers import run
from test_report_helpers import ENV, HEAD, measurement

from pytest_gpuperf.cli import EXIT_INVALID_INPUT, EXIT_OK, EXIT_USAGE
from pytest_gpuperf.model import Comparison, Kind, MeasurementResult, SessionResults, Verdict
from pytest_gpuperf.report.results_json import load_results, write_results
from pytest_gpuperf.verdict.stability import (
    NoChanges,
    assess,
    render,
    smallest_caught_slowdown,
    spread_limit,
    spread_upper_bound,
)


def test_the_spread_limit_and_its_inverse() -> None:
    # log(1.15) / (z(0.98) + z(0.95)) = 0.1398 / (2.054 + 1.645)
    assert spread_limit(0.15) == pytest.approx(0.03778, abs=1e-4)
    assert smallest_caught_slowdown(spread_limit(0.15)) == pytest.approx(0.15)
    assert smallest_caught_slowdown(0.0) == 0.0
    # a looser target or a larger slowdown leaves room for more spread
    assert spread_limit(0.15, false_alarms=0.05, caught=0.80) > spread_limit(0.15)
    assert spread_limit(0.30) > spread_limit(0.15)
    for bad in ({"false_alarms": 0.0}, {"caught": 1.0}):
        with pytest.raises(ValueError, match="must be in"):
            spread_limit(0.15, **bad)
    with pytest.raises(ValueError, match="slowdown must be positive"):
        spread_limit(0.0)


def test_the_upper_bound_narrows_with_sessions() -> None:
    few, many = spread_upper_bound(0.05, 3), spread_upper_bound(0.05, 200)
    assert few > many > 0.05
    assert many < 0.055


def _session(changes: dict[str, float | None], mode: str = "baseline") -> SessionResults:
    results = []
    for key, change in changes.items():
        m = measurement(f"tests/t.py::{key}", "default", 1000.0)
        verdict = Verdict.NEW if change is None else Verdict.UNCHANGED
        time_c = Comparison(m.key, "time.p50", verdict, 1000.0, None if change is None else 1000.0 / (1 + change),
                            change=change)  # fmt: skip
        memory = Comparison(m.key, "memory.peak_allocated", Verdict.UNCHANGED, 1.0, 1.0, change=0.5, kind=Kind.MEMORY)
        results.append(MeasurementResult(m, (memory, time_c)))
    return SessionResults(tuple(results), ENV, HEAD, mode, "2026-01-01T00:00:00+00:00")


def test_assess_pools_the_time_changes_of_each_measurement() -> None:
    sessions = [
        _session({"test_a": 0.05, "test_b": -0.02, "test_new": None}),
        _session({"test_a": -0.05, "test_b": 0.02}),
        _session({"test_new": None}),  # nothing against a baseline: not a session of the spread
    ]
    stability = assess(sessions)
    assert stability.sessions == 2
    assert [m.key for m in stability.measurements] == ["tests/t.py::test_a::default", "tests/t.py::test_b::default"]
    logs = [math.log(1.05), math.log(0.98), math.log(0.95), math.log(1.02)]
    assert stability.spread == pytest.approx(math.sqrt(sum(x * x for x in logs) / 4))  # the memory change not in it
    a = stability.measurements[0]
    assert a.rms == pytest.approx(math.sqrt((math.log(1.05) ** 2 + math.log(0.95) ** 2) / 2))
    text = render(stability)
    assert "4 time changes (time.p50) against baselines in 2 session(s)" in text
    assert "only 2 session(s): the spread is a rough estimate" in text
    with pytest.raises(NoChanges) as info:
        assess([_session({"test_new": None}), _session({})])
    assert info.value.sessions == 2


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (0.01, "15% slowdowns: within reach of baseline mode on this runner"),
        (0.036, "15% slowdowns: within reach at this spread but not at its upper bound"),
        (0.10, "15% slowdowns: not reliably caught by baseline mode on this runner; use --gpuperf-compare-ref"),
    ],
)
def test_what_the_spread_means_for_a_15_percent_slowdown(change: float, expected: str) -> None:
    sessions = [_session({"test_a": change if i % 2 else -change}) for i in range(20)]
    assert expected in render(assess(sessions))


def test_cli_skips_compare_ref_sessions_and_names_bad_files(tmp_path: Path) -> None:
    baseline_mode = [write_results(tmp_path / f"run-{i}.json", _session({"test_a": 0.01 * i})) for i in range(3)]
    ref = write_results(tmp_path / "ref.json", _session({"test_a": 0.30}, mode="compare-ref"))
    code, out, err = run("stability", *map(str, baseline_mode), str(ref))
    assert code == EXIT_OK
    assert f"skipped {ref}: a session in compare-ref mode, not baseline mode" in err
    assert "in 3 session(s)" in out and "tests/t.py::test_a::default" in out

    code, _, err = run("stability", str(ref))
    assert code == EXIT_INVALID_INPUT
    assert "no time change against a baseline" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    code, _, err = run("stability", str(baseline_mode[0]), str(broken))
    assert code == EXIT_INVALID_INPUT
    assert str(broken) in err
    code, _, err = run("stability", str(baseline_mode[0]), "--caught", "1.5")
    assert code == EXIT_USAGE
    assert "must be in" in err


@pytest.mark.slow
def test_on_real_gating_sessions(pytester: pytest.Pytester) -> None:
    """Baselines written by a real session, then two real gating sessions of the same code."""
    pytester.makepyfile(test_perf="def test_spin(gpu_bench):\n    gpu_bench(lambda: sum(range(2000)))\n")
    timing = (
        "--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.3", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert pytester.runpytest_subprocess("--gpuperf-update-baseline", *timing).ret == 0
    for i in range(2):
        result = pytester.runpytest_subprocess("--gpuperf", f"--gpuperf-json=run-{i}.json", *timing)
        assert result.ret in (0, 1)  # the verdict is not what this test is about
    runs = [pytester.path / f"run-{i}.json" for i in range(2)]
    changes = [
        next(c.change for c in load_results(p).results[0].comparisons if c.metric.startswith("time.")) for p in runs
    ]
    code, out, _ = run("stability", *map(str, runs))
    assert code == EXIT_OK, out
    expected = math.sqrt(sum(math.log1p(c) ** 2 for c in changes if c is not None) / 2)
    line = next(line for line in out.splitlines() if line.startswith("test_perf.py::test_spin::default"))
    assert line.split()[1:3] == ["2", f"{expected:.1%}"]
