from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from test_report_helpers import baseline, device_session, make_session, measurement, time_cmp

from pytest_gpuperf.model import Comparison, Kind, MeasurementResult, Note, RuleNote, SessionResults, Verdict
from pytest_gpuperf.report.markdown import MARKER, render_comment

GOLDEN = Path(__file__).parent / "data" / "report_comment.md"


def test_comment_matches_golden_file() -> None:
    text = render_comment(make_session())
    if os.environ.get("GPUPERF_UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    expected = GOLDEN.read_text(encoding="utf-8")
    assert text == expected, f"{GOLDEN} differs; rerun with GPUPERF_UPDATE_GOLDEN=1 if the change is intended"


def test_comment_structure() -> None:
    text = render_comment(make_session())
    lines = text.splitlines()
    assert lines[0] == MARKER == "<!-- pytest-gpuperf-comment -->"
    assert text.count(MARKER) == 1
    summary = next(line for line in lines if "regression" in line)
    assert "1 regression, 1 improvement, 1 unchanged, 1 new, 1 not comparable, 1 unstable" in summary
    assert "`origin/main`" in summary
    header = lines.index("| test | measurement | metric | base | head | change | evidence | verdict |")
    first_row = lines[header + 2]
    assert "test_matmul.py::test_matmul[fp16-4096]" in first_row
    assert "| 1.000 ms | 1.250 ms | +25.0% |" in first_row
    assert first_row.endswith("🔴 regression |")
    assert text.count("<details>") == text.count("</details>") == 4
    assert "<summary>Top operators</summary>" in text
    assert "`aten::mm` | 1.100 ms | 88.0%" in text
    # A pipe inside a cell is escaped so the table keeps its columns.
    assert "ampere_fp16_gemm\\|x" in text
    assert all(line.count(" | ") + 2 == 9 for line in lines[header : header + 10] if line.startswith("| "))


def test_profiles_section_only_when_profiled() -> None:
    session = make_session()
    no_profiles: SessionResults = dataclasses.replace(
        session,
        results=tuple(
            dataclasses.replace(r, measurement=dataclasses.replace(r.measurement, profile=None))
            for r in session.results
        ),
    )
    text = render_comment(no_profiles)
    assert "Top operators" not in text
    assert text.count("<details>") == 3


def test_empty_session_still_has_marker_and_summary() -> None:
    session = make_session()
    empty = dataclasses.replace(session, results=())
    text = render_comment(empty)
    assert text.startswith(MARKER)
    assert "0 regressions, 0 improvements, 0 unchanged, 0 new, 0 not comparable" in text
    assert "No measurements were taken." in text


def _busy_suite(tests: int) -> SessionResults:
    """A baseline-mode run of ``tests`` measurements whose baselines were all written busy: not gated, each noted."""
    results = []
    for i in range(tests):
        m = measurement(f"tests/benchmarks/test_suite.py::test_{i}", "benchmark", 1000.0 + i,
                        notes=(Note(f"the baseline was written while the runner was busy ({i}): write it again",
                                    topic="written-busy"),))  # fmt: skip
        base = baseline(m, 1000.0)
        step = RuleNote(
            "busy-runner", Verdict.NOT_GATED, f"not gated: the baseline was written busy ({i}); " + "x" * 200
        )
        memory = Comparison(m.key, "memory.peak_allocated", Verdict.UNCHANGED, 0.0, baseline=0.0, unit="B",
                            kind=Kind.MEMORY)  # fmt: skip
        timing = time_cmp(m, base, Verdict.NOT_GATED, note=step.note, explanation=(step,))
        results.append(MeasurementResult(m, (timing, memory), base))
    return dataclasses.replace(make_session(), results=tuple(results), mode="baseline", compare_ref=None)


def test_notes_of_one_kind_are_one_bullet_and_unchanged_memory_no_row() -> None:
    """A 40-test run whose baselines were written busy: two bullets, not 40, and a row a test."""
    text = render_comment(_busy_suite(40))
    main = text.split("<details>")[0].splitlines()  # before the collapsed sections
    bullets = [line for line in main if line.startswith("- ")]
    assert bullets == [
        "- **not gated \\[busy-runner\\]**: `tests/benchmarks/test_suite.py::test_0::benchmark` and 39 more: "
        "not gated: the baseline was written busy (0); " + "x" * 200,
        "- **written-busy**: `tests/benchmarks/test_suite.py::test_0::benchmark` and 39 more: "
        "the baseline was written while the runner was busy (0): write it again",
        "- every measurement's notes: the HTML report and the results JSON",
    ]
    assert sum(line.startswith("| `test_suite.py::") for line in main) == 40
    assert "40 unchanged memory or metric comparisons: in the HTML report and the results JSON." in text


def test_the_energy_row_says_where_the_energy_came_from() -> None:
    text = render_comment(device_session())
    row = next(line for line in text.splitlines() if "`metric.energy`" in line or "metric.energy" in line)
    assert "| 600.0 mJ | 620.0 mJ | +3.3% | NVML energy counter | ⚪ unchanged |" in row
