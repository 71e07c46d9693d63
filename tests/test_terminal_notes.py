"""Which notes the terminal summary writes under "gpuperf notes"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpuperf.baseline.store import EntryChange
from pytest_gpuperf.config import GpuperfConfig, resolve
from pytest_gpuperf.model import (
    Comparison,
    MeasurementResult,
    Note,
    NoteKind,
    Provenance,
    RuleNote,
    SessionResults,
    Verdict,
)
from pytest_gpuperf.report.notes import LINE_LIMIT
from pytest_gpuperf.report.terminal import change_lines, render_explanations, render_notes, render_unjudged
from tests.test_noise_floor_cap import ARGS, noisy_baseline_project
from tests.verdict_helpers import ENV, measurement


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_sep(self, sep: str, title: str) -> None:
        self.lines.append(f"{sep * 3} {title}")

    def write_line(self, line: str, **markup: bool) -> None:
        self.lines.append(line)


def session(*comparisons: Comparison) -> SessionResults:
    results = tuple(
        MeasurementResult(measurement(1000.0, test_id=f"t.py::test_{i}"), (c,)) for i, c in enumerate(comparisons)
    )
    return SessionResults(results, ENV, Provenance(), "baseline", "2026-11-24T00:00:00")


def time_comparison(i: int, change: float, verdict: Verdict, note: str) -> Comparison:
    key = f"t.py::test_{i}::default"
    return Comparison(key, "time.p50", verdict, 1000.0 * (1 + change), baseline=1000.0, change=change, note=note)


def test_an_unchanged_time_past_the_threshold_says_why() -> None:
    raised = "threshold raised from 10.0% to 17.3% by run-to-run noise"
    floor = "the fastest 10% of calls moved only +1.2% (needs 5.0%): contention on the machine, not a change in work"
    writer = Writer()
    render_notes(
        writer,
        session(
            time_comparison(0, 0.158, Verdict.UNCHANGED, raised),  # +15.8% "unchanged": the reader needs the reason
            time_comparison(1, -0.12, Verdict.UNCHANGED, floor),  # faster past it, likewise
            time_comparison(2, 0.04, Verdict.UNCHANGED, "threshold raised from 10.0% to 11.0% by run-to-run noise"),
            time_comparison(3, 0.30, Verdict.REGRESSION, "confirmed by 1 re-measure(s): +30.0% then +29.5%"),
        ),
        threshold=0.10,
    )
    assert writer.lines == [
        "--- gpuperf notes",
        f"t.py::test_0::default: {raised}",
        f"t.py::test_1::default: {floor}",
        "t.py::test_3::default: confirmed by 1 re-measure(s): +30.0% then +29.5%",
    ]  # +4% is within the threshold: its routine raise stays in the results files


def test_nothing_to_say_writes_no_section() -> None:
    writer = Writer()
    render_notes(writer, session(time_comparison(0, 0.03, Verdict.UNCHANGED, "")), threshold=0.02)
    assert writer.lines == []


def test_notes_are_chosen_by_their_kind_not_their_wording() -> None:
    """A routine note stays in the files whatever it says; a notice is shown even where it reads like one."""
    notes = (
        Note("precision 3.1% above target 2.0% at the time budget (10s)", NoteKind.ROUTINE),
        Note("precision of the input changed to bfloat16 by the test"),  # a notice, worded like a routine note
        Note("the power cap trimmed the clocks within bounds", NoteKind.ROUTINE),
    )
    result = MeasurementResult(measurement(1000.0, test_id="t.py::test_0", notes=notes), ())
    writer = Writer()
    render_notes(writer, SessionResults((result,), ENV, Provenance(), "baseline", "2026-11-24T00:00:00"), 0.10)
    assert writer.lines == [
        "--- gpuperf notes",
        "t.py::test_0::default: precision of the input changed to bfloat16 by the test",
    ]


@pytest.mark.parametrize(
    ("options", "expected"),
    [({}, 0.10), ({"compare_ref": "main"}, 0.02), ({"compare_ref": "main", "threshold": 0.05}, 0.05),
     ({"threshold": 0.2}, 0.2)],
)  # fmt: skip
def test_the_notes_threshold_is_the_gates_own(options: dict[str, object], expected: float) -> None:
    config = GpuperfConfig(enabled=True, **options)  # type: ignore[arg-type]
    assert resolve(config).gate.threshold == pytest.approx(expected)


def ruled(i: int, change: float, verdict: Verdict, *rules: str) -> Comparison:
    """A comparison whose note the named rules wrote (each with its own numbers)."""
    steps = tuple(RuleNote(rule, verdict, f"{rule} saw {change:+.1%} on test {i}") for rule in rules)
    key = f"t.py::test_{i}::default"
    return Comparison(key, "time.p50", verdict, 1000.0 * (1 + change), baseline=1000.0, change=change,
                      note="; ".join(s.note for s in steps), explanation=steps)  # fmt: skip


def test_notes_of_one_kind_are_one_line_with_a_count_and_the_tests() -> None:
    comparisons = [ruled(i, 0.3 + i / 100, Verdict.UNSTABLE, "busy-runner") for i in range(5)]
    results = tuple(
        MeasurementResult(
            measurement(1000.0, test_id=f"t.py::test_{i}", notes=(Note(f"written busy (pressure {i}0%)", topic="x"),)),
            (c,),
        )
        for i, c in enumerate(comparisons)
    )
    writer = Writer()
    render_notes(writer, SessionResults(results, ENV, Provenance(), "baseline", "2026-11-28T00:00:00"), 0.10)
    assert writer.lines == [
        "--- gpuperf notes",
        "unstable [busy-runner]: 5 measurements (t.py::test_0::default, +4 more): busy-runner saw +30.0% on test 0",
        "x: 5 measurements (t.py::test_0::default, +4 more): written busy (pressure 00%)",
        "every note in full: --gpuperf-explain, and the reports (--gpuperf-json, --gpuperf-html)",
    ]


def test_a_verdicts_notes_are_of_the_rule_that_gave_it_with_that_rules_note() -> None:
    """A threshold raised by noise on one test and not on another does not split one reason into two lines."""
    raised = RuleNote("noise-floor", Verdict.UNCHANGED, "threshold raised from 10.0% to 12.0% by run-to-run noise")
    first = ruled(0, 0.3, Verdict.NOT_GATED, "busy-runner")
    first = replace(first, explanation=(raised, *first.explanation), note=f"{raised.note}; {first.note}")
    comparisons = [first, ruled(1, 0.2, Verdict.NOT_GATED, "busy-runner")]
    writer = Writer()
    render_notes(writer, session(*comparisons), 0.10)
    assert writer.lines[1:] == [
        "not gated [busy-runner]: 2 measurements (t.py::test_0::default, +1 more): busy-runner saw +30.0% on test 0",
        "every note in full: --gpuperf-explain, and the reports (--gpuperf-json, --gpuperf-html)",
    ]


def test_every_line_keeps_under_the_limit_with_the_start_and_end_of_its_note() -> None:
    """A note says what was found first and what to do last: the middle gives way, at words."""
    found, action = "not gated: the baseline was written busy", "write it again in a quieter hour"
    long = f"{found} ({', '.join(f'evidence {i}' for i in range(40))}); {action}"
    notes = (Note("written busy " + "busy " * 80 + "now", topic="written-busy"),)
    results = tuple(MeasurementResult(measurement(1000.0, test_id=f"t.py::test_{i}", notes=notes),
                                      (time_comparison(i, 0.3, Verdict.NOT_GATED, long),))
                    for i in range(2))  # fmt: skip
    writer = Writer()
    render_notes(writer, SessionResults(results, ENV, Provenance(), "baseline", "2026-11-24T00:00:00"), 0.10)
    assert len(writer.lines) == 4 and all(len(line) <= LINE_LIMIT for line in writer.lines)
    head, tail = writer.lines[1].split(" … ")
    who = "2 measurements (t.py::test_0::default, +1 more)"
    assert head.startswith(f"{who}: {found}") and tail == action  # the last clause, whole
    assert f"{who}: {long}".startswith(head) and long.endswith(tail)  # whole words
    assert writer.lines[2].startswith("written-busy: 2 measurements: written busy")  # a note that needs the room
    assert " … " in writer.lines[2] and writer.lines[2].endswith("busy busy now")
    assert writer.lines[3].startswith("every note in full: --gpuperf-explain")


def test_the_unjudged_line_wraps_under_the_limit() -> None:
    unjudged = session(*(ruled(i, 0.3, Verdict.UNSTABLE, "busy-runner") for i in range(3)))
    writer = Writer()
    render_unjudged(writer, unjudged)
    assert len(writer.lines) == 2 and all(len(line) <= LINE_LIMIT for line in writer.lines)
    assert writer.lines[0].startswith("gpuperf: 3 of 3 measurements could not be judged: 3 unstable (busy-runner).")
    assert writer.lines[1].startswith(" " * len("gpuperf: ")) and writer.lines[1].endswith(
        "(--gpuperf-explain says why)"
    )


def test_explain_gives_every_note_of_a_measurement_in_full() -> None:
    notes = (Note("written " + "busy " * 80, topic="written-busy"), Note("rounds pinned to CPU 3", NoteKind.ROUTINE))
    result = MeasurementResult(measurement(1000.0, test_id="t.py::test_0", notes=notes),
                               (time_comparison(0, 0.3, Verdict.NOT_GATED, "not gated: " + "why " * 60),))  # fmt: skip
    writer = Writer()
    render_explanations(writer, SessionResults((result,), ENV, Provenance(), "baseline", "2026-11-24T00:00:00"))
    assert f"t.py::test_0::default note (notice): {notes[0].text}" in writer.lines
    assert "t.py::test_0::default note (routine): rounds pinned to CPU 3" in writer.lines


def test_a_passing_run_with_many_tests_sharing_a_note_prints_it_once(pytester: pytest.Pytester) -> None:
    noisy_baseline_project(pytester, tests=4)
    result = pytester.runpytest_subprocess("--gpuperf", *ARGS)
    result.assert_outcomes(passed=4)
    lines = result.outlines
    notes = lines[next(i for i, line in enumerate(lines) if "gpuperf notes" in line) + 1 :]
    notes = notes[: next(i for i, line in enumerate(notes) if line.startswith(("gpuperf:", "=")))]
    assert len(notes) == 3, notes
    assert notes[0].startswith("not gated [noisy-baseline]: 4 measurements: not gated: +")
    assert notes[1].startswith("written-busy: 4 measurements")
    assert sum("the baseline was written while the runner was busy" in line for line in lines) == 1
    closing = lines[lines.index(next(line for line in lines if "gpuperf notes" in line)) :]
    assert all(len(line) <= LINE_LIMIT for line in closing), max(closing, key=len)


def test_an_update_names_its_entries_once_per_file_and_kind(tmp_path: Path) -> None:
    module = tmp_path / "baselines" / "cpu" / "test_b.py.json"
    changes = [EntryChange(f"test_b.py::test_{i}::default", module, "added") for i in range(5)]
    changes += [EntryChange("test_b.py::test_9::default", module, "updated")]
    changes += [EntryChange(f"test_b.py::test_{i}::default", module, "unchanged") for i in (7, 8)]
    assert change_lines(changes, lambda path: path.relative_to(tmp_path).as_posix()) == [
        "gpuperf: baseline added: 5 entries (test_b.py::test_0::default, test_b.py::test_1::default, +3 more) "
        "in baselines/cpu/test_b.py.json",
        "gpuperf: baseline updated: test_b.py::test_9::default in baselines/cpu/test_b.py.json",
        "gpuperf: 2 baseline entries unchanged (kept as is)",
    ]
