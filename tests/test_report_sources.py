"""Each figure a report shows has one source and says which; units and words fit the mode."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_gpuperf.model import MeasurementResult, Provenance, SessionResults, Verdict
from pytest_gpuperf.report.failure import failure_message
from pytest_gpuperf.report.html import distribution_figure, render_html
from pytest_gpuperf.report.markdown import render_comment
from pytest_gpuperf.units import format_time
from tests.test_report_profile_helpers import cpu_extra_op_diff, regressed, session_of
from tests.verdict_helpers import ENV, compare, entry, measurement

BASE_LABEL = "base (main)"


def confirmed_by_pairs() -> MeasurementResult:
    """Compare-ref after fresh pairs confirmed: the time comparison carries the pairs' figures (compare_ref.engine),
    the measurement and its base side keep the first pair's samples."""
    m, base = measurement(1835.0), entry(1307.0)
    first, *rest = compare(m, base)
    pairs = dataclasses.replace(first, current=1424.0, baseline=1085.0, change=1424.0 / 1085.0 - 1.0,
                                verdict=Verdict.REGRESSION, evidence="median of 5 fresh pair ratios")  # fmt: skip
    return MeasurementResult(m, (pairs, *rest), base)


def compare_ref_session(*results: MeasurementResult) -> SessionResults:
    return SessionResults(results, ENV, Provenance(commit="h" * 40), "compare-ref", "2026-11-28T00:00:00",
                          compare_ref="main", base_provenance=Provenance(commit="b" * 40, branch="main"))  # fmt: skip


def test_the_html_names_the_source_of_the_verdicts_figures() -> None:
    result = confirmed_by_pairs()
    page = render_html(compare_ref_session(result))
    assert "The verdict's figures, as in the summary: now 1.424 us, base (main) 1.085 us (+31.2%)" in page
    assert "median of 5 fresh pair ratios" in page
    assert f"median {format_time(result.measurement.stats.median_ns)}" in page and "the first reading's" in page


def test_each_bar_of_the_figure_is_its_own_samples_statistic() -> None:
    result = confirmed_by_pairs()
    ax = distribution_figure(result, BASE_LABEL).axes[0]
    bars = {str(line.get_label()): line.get_xdata()[0] for line in ax.lines if str(line.get_label()).endswith("p50")}
    assert bars["now p50"] * 1e3 == result.measurement.stats.median_ns
    assert result.baseline is not None and bars[f"{BASE_LABEL} p50"] * 1e3 == result.baseline.stats.median_ns


def test_where_the_figures_are_the_samples_no_line_is_added() -> None:
    m, base = measurement(1500.0), entry(1000.0)
    page = render_html(compare_ref_session(MeasurementResult(m, compare(m, base), base)))
    assert "The verdict's figures" not in page


def test_the_comment_gives_memory_in_units_and_names_the_reference_of_compare_ref() -> None:
    m, base = (
        measurement(1000.0, peak_allocated_bytes=1_048_576 + 163_840),
        entry(1000.0, peak_allocated_bytes=1_048_576),
    )
    session = compare_ref_session(MeasurementResult(m, compare(m, base), base))
    comment = render_comment(session)
    assert "+160.0 KiB is below the 1.000 MiB floor" in comment and "bytes" not in comment
    assert "baselines recorded at" not in comment and "**base (main)**" in comment
    as_baseline = dataclasses.replace(session, mode="baseline", compare_ref=None)
    assert "baselines recorded at" in render_comment(as_baseline)


def test_the_comment_shows_no_runners_absolute_trace_paths(tmp_path: Path) -> None:
    diff = cpu_extra_op_diff()
    inside = dataclasses.replace(diff, head_trace=str(tmp_path / "profiles" / "t.head.json"),
                                 base_trace="/home/runner/work/project/.gpuperf/profiles/t.base.json")  # fmt: skip
    comment = render_comment(session_of(regressed(inside)), folder=tmp_path)
    assert "head `profiles/t.head.json`" in comment and "base `t.base.json`" in comment
    assert str(tmp_path) not in comment and "/home/runner" not in comment


def test_a_compare_ref_failure_names_the_ref_base_not_a_baseline() -> None:
    result = confirmed_by_pairs()
    message = failure_message(result, "cpu", compare_ref="main")
    assert "ref base commit: abc123 (main)" in message
    assert "baseline" not in message
    assert "baseline commit: abc123" in failure_message(result, "cpu")
