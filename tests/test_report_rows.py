"""What every report shows for a measurement (report/rows.py): a verdict worded so it cannot mislead."""

from __future__ import annotations

import io

from pytest_gpuperf.model import Metric, Provenance, SessionResults, Verdict
from pytest_gpuperf.report.html import render_html
from pytest_gpuperf.report.markdown import render_comment
from pytest_gpuperf.report.terminal import PlainWriter, render_summary
from pytest_gpuperf.verdict.confirmation import by_remeasures, time_of
from tests.verdict_helpers import ENV, SHARED_RULES, entry, judged, measurement


def summary(*results: object) -> str:
    session = SessionResults(tuple(results), ENV, Provenance(), "baseline", "2026-11-28T00:00:00")  # type: ignore[arg-type]
    out = io.StringIO()
    render_summary(session, PlainWriter(out, color=False, width=200))
    return out.getvalue()


def row_of(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(name) or f" {name} " in line)


def test_a_memory_regression_on_a_faster_time_names_the_metric_that_regressed() -> None:
    faster_bigger = measurement(630.0, name="amp.bf16", peak_allocated_bytes=2 * 2**20)
    result = judged(faster_bigger, entry(1000.0, key="t.py::test_a::amp.bf16", peak_allocated_bytes=2**20),
                    rules=SHARED_RULES)  # fmt: skip
    assert result.verdict is Verdict.REGRESSION and time_of(result).verdict is not Verdict.REGRESSION
    row = row_of(summary(result), "amp.bf16")
    assert row.endswith("regression (memory.peak_allocated)"), row
    assert "-37" in row  # the time's change, beside the verdict that is the memory's


def test_an_improvement_fresh_readings_did_not_confirm_reads_not_confirmed() -> None:
    first = judged(measurement(700.0), entry(1000.0), rules=SHARED_RULES)
    assert time_of(first).verdict is Verdict.IMPROVEMENT
    reading = judged(measurement(1000.0, samples_ns=entry(1000.0).samples_ns), entry(1000.0), rules=SHARED_RULES)
    assert time_of(reading).verdict is Verdict.UNCHANGED
    cleared = by_remeasures(time_of(first), [reading], Verdict.IMPROVEMENT)
    assert cleared.verdict is Verdict.UNCHANGED
    assert row_of(summary(cleared), "default").endswith("not confirmed")
    session = SessionResults((cleared,), ENV, Provenance(), "baseline", "2026-11-28T00:00:00")
    assert "⚪ not confirmed |" in render_comment(session)
    assert "<td>not confirmed</td>" in render_html(session)
    plain_unchanged = judged(measurement(1000.0, samples_ns=entry(1000.0).samples_ns), entry(1000.0))
    assert row_of(summary(plain_unchanged), "default").endswith("unchanged")


def test_a_metric_named_by_a_state_says_what_the_baseline_has_instead() -> None:
    cached = Metric("first_call_cached_s", 2.0, unit="s", better="lower", tolerance=1.0)
    compiled = Metric("first_call_s", 9.0, unit="s", better="lower", tolerance=1.0)
    steady = measurement(1000.0, name="compile.steady", metrics=(compiled,), samples_ns=entry(1000.0).samples_ns)
    result = judged(steady, entry(1000.0, key="t.py::test_a::compile.steady", metrics=(cached,)), rules=SHARED_RULES)
    row = row_of(summary(result), "compile.steady")
    assert row.endswith("new (metric.first_call_s; the baseline has metric.first_call_cached_s instead)"), row
    session = SessionResults((result,), ENV, Provenance(), "baseline", "2026-11-28T00:00:00")
    assert "🆕 new (the baseline has metric.first_call_cached_s instead) |" in render_comment(session)


def test_every_report_says_how_much_of_a_busy_runners_time_was_contention() -> None:
    from pytest_gpuperf.model import Scheduling, WaitSource

    n = 300
    waits = (1000.0,) * n  # every call waited as long as it worked: the wall clock reads +100%
    busy = measurement(2000.0, scheduling=Scheduling(WaitSource.SCHEDSTAT, waits, (0.0,) * n, waits, (0.0,) * n,
                                                       waits, cpus=2))  # fmt: skip
    result = judged(busy, entry(1000.0))
    assert time_of(result).verdict is Verdict.UNCHANGED and time_of(result).correction is not None
    session = SessionResults((result,), ENV, Provenance(), "baseline", "2026-12-07T00:00:00")  # type: ignore[arg-type]
    said = "1 of 1 measurement waited for a CPU (up to 50% of their time); their verdicts read the times less that wait"
    assert said in summary(result)
    assert said in render_comment(session)
    html = render_html(session)
    assert said in html and "less wait (50% / 0% waited)" in html
    quiet = judged(measurement(1000.0), entry(1000.0))
    assert "waited for a CPU" not in summary(quiet)
