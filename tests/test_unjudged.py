"""A run that could not judge what it was asked to says so first: its last line and the PR comment's first."""

from __future__ import annotations

import pytest

from pytest_gpuperf.model import Comparison, MeasurementResult, Provenance, RuleNote, SessionResults, Verdict
from pytest_gpuperf.report.markdown import render_comment
from pytest_gpuperf.report.rows import deciding_rule, unjudged_line
from tests.test_noise_floor_cap import ARGS, noisy_baseline_project
from tests.verdict_helpers import ENV, measurement


def comparison(i: int, verdict: Verdict, *steps: tuple[str, Verdict]) -> Comparison:
    explanation = tuple(RuleNote(rule, v, f"{rule} said {v.value}") for rule, v in steps)
    return Comparison(f"t.py::test_{i}::default", "time.p50", verdict, 1600.0, baseline=1000.0, change=0.6,
                      explanation=explanation)  # fmt: skip


def session(*comparisons: Comparison, compare_ref: str | None = None) -> SessionResults:
    results = tuple(
        MeasurementResult(measurement(1000.0, test_id=f"t.py::test_{i}"), (c,)) for i, c in enumerate(comparisons)
    )
    return SessionResults(results, ENV, Provenance(), "baseline", "2026-11-28T00:00:00", compare_ref=compare_ref)


BUSY = (("significance", Verdict.REGRESSION), ("busy-runner", Verdict.UNSTABLE), ("health", Verdict.UNSTABLE))
MIXED = session(
    comparison(0, Verdict.UNSTABLE, *BUSY),
    comparison(1, Verdict.UNSTABLE, *BUSY),
    comparison(2, Verdict.NOT_GATED, ("significance", Verdict.REGRESSION), ("noisy-baseline", Verdict.NOT_GATED)),
    comparison(3, Verdict.UNCHANGED, ("significance", Verdict.UNCHANGED)),
)


def test_the_rule_that_decided_is_the_last_that_changed_the_verdict() -> None:
    assert deciding_rule(comparison(0, Verdict.UNSTABLE, *BUSY)) == "busy-runner"
    assert deciding_rule(comparison(0, Verdict.UNCHANGED, ("significance", Verdict.UNCHANGED))) is None


def test_the_line_counts_what_was_not_judged_why_and_what_to_do() -> None:
    line = unjudged_line(MIXED)
    assert line is not None
    counts = "2 unstable (busy-runner), 1 not gated (noisy-baseline)"
    assert line.startswith(f"3 of 4 measurements could not be judged: {counts}")
    # the advice follows the rule that decided: a baseline written busy or noisy is written again
    assert "write the baselines written busy again with --gpuperf-update-baseline" in line
    assert "write the noisy baselines again" in line and "--gpuperf-strict" in line
    compare_ref = session(comparison(0, Verdict.UNSTABLE, *BUSY), compare_ref="main")
    assert "--gpuperf-compare-ref" not in (unjudged_line(compare_ref) or "")
    assert unjudged_line(session(comparison(0, Verdict.UNCHANGED))) is None
    elsewhere = unjudged_line(session(comparison(0, Verdict.NOT_COMPARABLE, ("reference", Verdict.NOT_COMPARABLE))))
    assert elsewhere is not None and "--gpuperf-compare-ref" not in elsewhere
    assert "record baselines on this device class with --gpuperf-update-baseline" in elsewhere


def test_a_base_that_could_not_run_a_test_is_no_matter_of_a_quieter_runner() -> None:
    cannot_import = comparison(0, Verdict.NOT_GATED, ("reference", Verdict.NOT_GATED))
    line = unjudged_line(session(cannot_import, compare_ref="origin/main"))
    assert line is not None and "1 not gated (reference)" in line
    assert "the base (origin/main) could not run some: each one's note says why" in line
    assert "quieter runner" not in line
    both = unjudged_line(session(cannot_import, comparison(1, Verdict.UNSTABLE, *BUSY), compare_ref="origin/main"))
    assert both is not None and "could not run some" in both and "run it again on a quieter runner" in both


def test_the_pr_comment_says_it_first() -> None:
    lines = render_comment(MIXED).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("⚠️"))
    counts = next(i for i, line in enumerate(lines) if "regressions" in line)
    assert first < counts and "3 of 4 measurements could not be judged" in lines[first]


def test_the_runs_last_line_says_it(pytester: pytest.Pytester) -> None:
    noisy_baseline_project(pytester, tests=2)
    result = pytester.runpytest_subprocess("--gpuperf", *ARGS)
    result.assert_outcomes(passed=2)
    ours = [line for line in result.outlines if line.startswith("gpuperf:")]
    assert ours[-1].startswith("gpuperf: 2 of 2 measurements could not be judged: 2 not gated (noisy-baseline)")
    assert "=" in result.outlines[-1] and "passed" in result.outlines[-1]  # pytest's own line follows, nothing else
    assert result.outlines[-3] == ours[-1]  # and its continued line (notes.wrapped)
    assert result.outlines[-2].strip().endswith("--gpuperf-strict (--gpuperf-explain says why)")


def test_a_not_resolved_test_is_told_what_would_resolve_it_by_what_it_can_resolve() -> None:
    import dataclasses

    from pytest_gpuperf.model import Detectable

    steps = (("against-threshold", Verdict.NOT_RESOLVED),)

    def unresolved(needed: int, readings: int) -> SessionResults:
        found = Detectable(0.03, 0.02, 0.8, readings, "fresh pairs", needed)
        c = dataclasses.replace(comparison(0, Verdict.NOT_RESOLVED, *steps), detectable=found)
        return session(c, compare_ref="main")

    short = unjudged_line(unresolved(needed=30, readings=12))
    assert short is not None and "1 not resolved (against-threshold)" in short
    assert "give the fresh pairs more room (--gpuperf-confirm-pairs=30) or a quieter runner" in short
    close = unjudged_line(unresolved(needed=5, readings=12))  # the pairs resolve 2%: the change sits near it
    assert close is not None and "their changes lie close to the threshold" in close
    assert "--gpuperf-confirm-pairs" not in close
