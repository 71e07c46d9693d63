"""benchmarks/detection_trace.py on real results files: outcomes, per-test lines, reasons, bad names."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_scripts import benchmark_script
from test_report_helpers import make_session

from pytest_gpuperf.model import Comparison, MeasurementResult, SessionResults, Verdict
from pytest_gpuperf.report.results_json import write_results

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "detection_trace.py"


@pytest.fixture(scope="module")
def trace() -> Iterator[ModuleType]:
    with benchmark_script("detection_trace") as module:
        yield module


def _quiet(result: MeasurementResult, note: str) -> MeasurementResult:
    """``result`` with its time regression turned into an unchanged verdict carrying ``note``."""

    def calm(c: Comparison) -> Comparison:
        if c.metric.startswith("time.") and c.verdict is Verdict.REGRESSION:
            return dataclasses.replace(c, verdict=Verdict.UNCHANGED, note=note)
        return c

    return dataclasses.replace(result, comparisons=tuple(calm(c) for c in result.comparisons))


def test_outcomes_lines_and_reasons(trace: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = make_session()  # one test regressed
    quiet = dataclasses.replace(
        session,
        results=tuple(_quiet(r, "threshold raised from 10.0% to 14.2% by run-to-run noise") for r in session.results),
    )
    write_results(tmp_path / "gpuperf-baseline-t1-l0.json", session)  # regression on unchanged code
    write_results(tmp_path / "gpuperf-baseline-t1-l15.json", session)  # caught
    write_results(tmp_path / "gpuperf-baseline-t2-l15.json", quiet)  # missed

    assert trace.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "gpuperf-baseline trial 1 at 0%: FALSE ALARM" in out
    assert "gpuperf-baseline trial 1 at 15%: caught" in out
    assert "gpuperf-baseline trial 2 at 15%: MISSED" in out
    assert "test_matmul[fp16-4096]: regression +25.0% (threshold 5.0%" in out
    assert "3 session(s) shown" in out

    assert trace.main([str(tmp_path), "--misses"]) == 0
    out = capsys.readouterr().out
    assert "trial 1 at 15%" not in out
    assert "trial 1 at 0%: FALSE ALARM" in out and "trial 2 at 15%: MISSED" in out
    assert "noise-raised threshold: 1" in out  # the quieted regression, the only slowed test not failed
    assert "2 session(s) shown" in out


def test_a_misnamed_file_is_named(trace: ModuleType, tmp_path: Path) -> None:
    path = write_results(tmp_path / "results.json", make_session())
    with pytest.raises(ValueError, match=r"results\.json: not a detection results file"):
        trace.read_session(path)


def test_unchanged_codes_spread_is_printed_next_to_the_limit(
    trace: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = make_session()
    write_results(tmp_path / "gpuperf-baseline-t1-l0.json", session)
    write_results(tmp_path / "gpuperf-baseline-t2-l0.json", session)
    write_results(tmp_path / "gpuperf-baseline-t1-l15.json", session)  # slowed code: not part of the spread
    unchanged = [t for s in trace.sessions(tmp_path) for t in s if t.level == 0 and t.change is not None]
    logs = [math.log1p(t.change) for t in unchanged]
    rms = math.sqrt(sum(x * x for x in logs) / len(logs))

    assert trace.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"gpuperf-baseline: {rms:.1%} (mean {sum(logs) / len(logs):+.1%}, {len(logs)} tests)" in out
    assert "catch at least 95% of 15% slowdowns only while this is at most 3.8%" in out
    assert trace.main([str(tmp_path), "--misses"]) == 0  # misses alone would bias it: not printed
    assert "Spread of unchanged code" not in capsys.readouterr().out


def test_the_judged_change_is_the_corrected_one_where_a_side_waited(trace: ModuleType) -> None:
    def line(change: float | None, corrected: float | None) -> object:
        return trace.TestLine(
            tool="gpuperf-baseline", trial=1, level=0, test="t", verdict="unchanged", change=change,
            threshold=0.1, corrected=corrected, wait_share=0.5 if corrected is not None else None, machine=None,
            note="",
        )  # fmt: skip

    # +90% on the wall clock, +2% less the run-queue wait: the verdict read the latter
    first, second = trace.judged([line(0.90, 0.02), line(0.05, None)])
    assert first.change == pytest.approx(0.02) and second.change == pytest.approx(0.05)
    assert trace.unchanged_spread([line(0.05, None), line(-0.05, None)])[0] == pytest.approx(
        math.sqrt((math.log(1.05) ** 2 + math.log(0.95) ** 2) / 2)
    )
    assert trace.machine_moved({"vector.1": 12.0, "memory.1": 10.0}, {"vector.1": 10.0, "memory.1": 20.0}) == 0.5


def test_compare_ref_gets_its_spread_but_not_the_frozen_gates_limit(
    trace: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_results(tmp_path / "gpuperf-ref-t1-l0.json", make_session())
    write_results(tmp_path / "gpuperf-ref-t2-l0.json", make_session())
    assert trace.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "  gpuperf-ref: " in out
    assert "frozen number" not in out


def _pairs_session(evidence: str) -> SessionResults:
    """make_session's tests as unchanged compare-ref readings at a 2% threshold, the first one confirmed."""
    first = True

    def read(c: Comparison) -> Comparison:
        nonlocal first
        if not c.metric.startswith("time.") or c.change is None:
            return c
        confirmed, first = first, False
        return dataclasses.replace(
            c, verdict=Verdict.UNCHANGED, threshold=0.02, change=0.004 if confirmed else c.change,
            evidence=evidence if confirmed else "",
        )  # fmt: skip

    session = make_session()
    results = tuple(dataclasses.replace(r, comparisons=tuple(read(c) for c in r.comparisons)) for r in session.results)
    return dataclasses.replace(session, results=results)


def test_compare_refs_pairs_on_unchanged_code_are_summed_up(
    trace: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = "ratio 1.004 [0.98, 1.03] 95% CI, 3 fresh process pairs (ratios 1.010, 0.990, 1.012); first pair 1.030"
    write_results(tmp_path / "gpuperf-ref-t1-l0.json", _pairs_session(pairs))
    write_results(tmp_path / "gpuperf-ref-t2-l0.json", _pairs_session("ratio 1.004 [0.99, 1.02] 95% CI"))
    write_results(tmp_path / "gpuperf-ref-t1-l5.json", _pairs_session(pairs))  # slowed code: not counted

    (line, *_) = [t for t in next(trace.sessions(tmp_path)) if t.trial == 1 and t.level == 0]
    assert line.pairs() == ([1.010, 0.990, 1.012], 1.030)
    assert trace.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # six readings a session: the first test's first pair (1.030 where confirmed, else its +0.4%), -20%, +25%,
    # +0%, +2.3% and +2.2%; beyond 2%: five in the confirming session, four in the other
    assert "first pairs: 12 tests" in out and "9 beyond their threshold" in out
    assert "confirmations: 1 in 1 session(s), settled by 3 pairs: 1" in out
    logs = [math.log(r) for r in (1.010, 0.990, 1.012)]
    mean = sum(logs) / 3
    within = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    assert f"fresh pairs: 3, head over base log ratio {mean:+.2%}" in out
    assert f"spread within a confirmation {within:.2%} (pooled SD)" in out
