"""What each measurement can resolve, as the reports show it (report/resolution.py): the cell, the grouped note
and its command, in the terminal table's note, the PR comment and the HTML report."""

from __future__ import annotations

import dataclasses

from pytest_gpuperf.model import Detectable, Kind, MeasurementResult, SessionResults
from pytest_gpuperf.report.html import render_html
from pytest_gpuperf.report.markdown import render_comment
from pytest_gpuperf.report.resolution import detectable_cell, resolution_lines, unresolved
from tests.test_report_helpers import make_session

PAIRS = Detectable(change=0.034, threshold=0.02, power=0.8, readings=12, reading="fresh pairs", needed=35)
ROUNDS = Detectable(change=0.011, threshold=0.02, power=0.8, readings=16, reading="round pairs", needed=16)
NOISY = Detectable(change=0.21, threshold=0.1, power=0.8, readings=300, reading="samples", needed=None,
                   limit="the noise between runs recorded with the baseline and measured now")  # fmt: skip
SLOW = Detectable(change=0.15, threshold=0.1, power=0.8, readings=20, reading="samples", needed=60)


def with_detectable(session: SessionResults, *found: Detectable | None) -> SessionResults:
    """``session`` with the time comparisons of its first judged results carrying ``found``, in order."""
    results = list(session.results)
    timed = [i for i, r in enumerate(results) if any(c.metric.startswith("time.") for c in r.comparisons)]
    for i, d in zip(timed, found, strict=False):
        r = results[i]
        comparisons = tuple(dataclasses.replace(c, kind=Kind.TIME, detectable=d) if c.metric.startswith("time.")
                            else dataclasses.replace(c, kind=Kind.METRIC) for c in r.comparisons)  # fmt: skip
        results[i] = MeasurementResult(r.measurement, comparisons, r.baseline, r.outcome, r.profile_diff)
    return dataclasses.replace(session, results=tuple(results))


def judged(session: SessionResults) -> list[MeasurementResult]:
    return [r for r in session.results if any(c.metric.startswith("time.") for c in r.comparisons)]


def test_a_cell_says_what_a_measurement_resolves_and_against_what_where_it_falls_short() -> None:
    session = with_detectable(make_session(), ROUNDS, PAIRS)
    assert [detectable_cell(r) for r in judged(session)[:3]] == ["1.1%", "3.4% > 2.0%", "-"]
    assert detectable_cell(session.results[0]) == "-"  # a new measurement: nothing judged


def test_the_note_names_the_measurements_that_cannot_resolve_their_threshold_and_what_would() -> None:
    session = with_detectable(make_session(), ROUNDS, PAIRS)
    assert [r.measurement.key for r, _ in unresolved(session)] == [judged(session)[1].measurement.key]
    first, advice = resolution_lines(session)
    assert first.startswith("1 measurement cannot resolve its threshold of 2.0%: it resolves 3.4% at 80% power (")
    assert advice.startswith("about 35 fresh pairs would: pytest ")
    assert "--gpuperf-compare-ref=" in advice and advice.endswith("--gpuperf-confirm-pairs=35")
    assert all(len(line) < 200 for line in (first, advice))
    assert resolution_lines(with_detectable(make_session(), ROUNDS)) == []


def test_more_time_where_more_samples_would_resolve_it_and_a_quieter_runner_where_they_cannot() -> None:
    baseline = dataclasses.replace(make_session(), mode="baseline", compare_ref=None, base_provenance=None)
    _, slower = resolution_lines(with_detectable(baseline, SLOW))
    assert "about 3.0x the samples would: pytest " in slower and slower.endswith("--gpuperf-max-time=6")
    _, quieter = resolution_lines(with_detectable(baseline, NOISY))
    assert quieter.startswith("more readings cannot: the noise between runs")
    assert "gate with --gpuperf-compare-ref" in quieter


def test_the_comment_and_the_html_report_show_it() -> None:
    session = with_detectable(make_session(), ROUNDS, PAIRS)
    comment = render_comment(session)
    assert "| detectable change |" in comment and "| 3.4% \\> 2.0% |" in comment
    assert "🔍 1 measurement cannot resolve its threshold" in comment
    page = render_html(session)
    assert "<th>detectable change</th>" in page and "3.4% &gt; 2.0%" in page
    assert "cannot resolve its threshold" in page
