from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from test_report_helpers import baseline, device_session, make_session, measurement, time_cmp

from pytest_gpuperf.config import GateSettings
from pytest_gpuperf.model import Comparison, EnergySource, MeasurementResult, SessionResults, Verdict
from pytest_gpuperf.report.terminal import PlainWriter, render_summary, shorten_test_id
from tests.verdict_helpers import compare
from tests.verdict_helpers import entry as compare_entry
from tests.verdict_helpers import measurement as compare_measurement


class RecordingWriter:
    """Duck-typed like pytest's TerminalWriter; keeps what was written with its markup."""

    def __init__(self, fullwidth: int) -> None:
        self.fullwidth = fullwidth
        self.lines: list[tuple[str, dict[str, bool]]] = []

    def sep(self, sepchar: str, title: str | None = None, **markup: bool) -> None:
        self.lines.append((f"{sepchar * 3} {title} {sepchar * 3}", markup))

    def line(self, s: str = "", **markup: bool) -> None:
        self.lines.append((s, markup))

    def find(self, needle: str) -> tuple[str, dict[str, bool]]:
        return next(entry for entry in self.lines if needle in entry[0])


def test_table_has_headers_units_and_verdict_colours() -> None:
    tw = RecordingWriter(fullwidth=140)
    render_summary(make_session(), tw)
    assert tw.lines[0][0] == "=== gpuperf: compared with origin/main ==="
    header, markup = tw.lines[1]
    # compare-ref: the column holds the base commit's figures, not a recorded baseline's
    assert header.split() == ["test", "measurement", "p50", "now", "base", "change", "precision", "verdict"]
    assert markup == {"bold": True}

    reg, reg_markup = tw.find("test_matmul[fp16-4096]")
    assert reg.split()[1:] == ["default", "1.250", "ms", "1.000", "ms", "+25.0%", "±1.2%", "regression"]
    assert reg_markup == {"red": True}
    assert tw.find("forward")[1] == {"green": True}
    assert tw.find("backward")[1] == {}
    assert tw.find("not comparable")[1] == {"yellow": True}
    assert "2.500 s" in tw.find("test_flash")[0]
    assert "450.0 ns" in tw.find("backward")[0]
    # A regression on another metric gets its own line under the row.
    memory, memory_markup = tw.find("memory.peak_allocated")
    assert "3.000 GiB vs 2.000 GiB (+50.0%) regression" in memory
    assert memory_markup == {"red": True}
    assert tw.find("unstable: GPU clock throttled")[1] == {"yellow": True}


def test_the_reference_column_is_the_baseline_in_baseline_mode_and_the_base_in_compare_ref() -> None:
    from pytest_gpuperf.report.html import render_html
    from pytest_gpuperf.report.markdown import render_comment

    for session, column in ((dataclasses.replace(make_session(), compare_ref=None, mode="baseline"), "baseline"),
                            (make_session(), "base")):  # fmt: skip
        tw = RecordingWriter(fullwidth=140)
        render_summary(session, tw)
        assert tw.lines[1][0].split()[4] == column
        page = render_html(session)
        assert f"<th>now</th><th>{column}</th>" in page and f"<th>metric</th><th>{column}</th>" in page
        assert f"| {column} noise |" in render_comment(session)
        assert ("<th>baseline</th>" in page) == (column == "baseline")


def test_the_title_claims_no_comparison_when_every_measurement_is_new() -> None:
    session = make_session()
    new_only = dataclasses.replace(session, results=tuple(
        dataclasses.replace(r, comparisons=(), baseline=None) for r in session.results))  # fmt: skip
    tw = RecordingWriter(fullwidth=140)
    render_summary(new_only, tw)
    assert tw.lines[0][0] == "=== gpuperf: nothing compared with origin/main ==="


def test_regressions_come_first_and_counts_close_the_table() -> None:
    tw = RecordingWriter(fullwidth=140)
    render_summary(make_session(), tw)
    assert "regression" in tw.lines[2][0]
    last, markup = tw.lines[-1]
    assert last == (
        "gpuperf: 1 regression, 1 improvement, 1 unchanged, 1 new, 1 not comparable, 1 unstable, 1 not gated, "
        "1 not resolved"
    )
    assert markup == {"bold": True, "red": True}


def test_only_the_verdicts_that_are_nouns_take_a_plural() -> None:
    session = make_session()
    tw = RecordingWriter(fullwidth=140)
    render_summary(dataclasses.replace(session, results=session.results * 2), tw)
    assert tw.lines[-1][0] == (
        "gpuperf: 2 regressions, 2 improvements, 2 unchanged, 2 new, 2 not comparable, 2 unstable, 2 not gated, "
        "2 not resolved"
    )


MATMUL = "tests/perf/test_matmul.py::test_matmul[fp16-4096]"


def _table(width: int) -> list[str]:
    tw = RecordingWriter(fullwidth=width)
    render_summary(make_session(), tw)
    return [text for text, _ in tw.lines[1:] if not text.startswith(("    ", "gpuperf:"))]


@pytest.mark.parametrize(
    ("width", "first_id"),
    [(200, MATMUL), (120, MATMUL), (115, "tests/…/test_matmul.py::test_matmul[fp16-4096]")],  # a folder gives way
)  # fmt: skip
def test_rows_fit_the_terminal_on_one_line_each_when_the_ids_fit(width: int, first_id: str) -> None:
    table = _table(width)
    assert max(len(line) for line in table) <= width
    assert table[1].startswith(f"{first_id}  default")
    assert "tests/perf/test_attn.py::test_sdpa  " in table[2]  # a short id is left whole
    # Numbers stay right-aligned under their header.
    end_of_change = table[0].index("change") + len("change")
    assert {line[end_of_change - 1] for line in table[1:]} <= {"%", "-"}


@pytest.mark.parametrize(
    ("width", "first_id"),
    [(100, MATMUL), (80, MATMUL), (40, "…/test_matmul.py::test_matmul[fp16-4096]")],  # only folders give way
)  # fmt: skip
def test_narrow_tables_give_each_test_id_a_line_of_its_own(width: int, first_id: str) -> None:
    table = _table(width)
    assert table[0].split()[:3] == ["test", "/", "measurement"]
    assert table[1] == first_id
    assert table[2].split()[0] == "default"
    # a test's measurements stay together under its id, although their verdicts sort apart
    conv = table.index("tests/perf/test_conv.py::test_conv")
    assert [line.split()[0] for line in table[conv + 1 : conv + 3]] == ["forward", "backward"]
    assert sum("test_conv" in line for line in table) == 1


@pytest.mark.parametrize(
    ("test_id", "width", "expected"),
    [
        ("tests/alpha/beta/test_x.py::test_a[p]", 37, "tests/alpha/beta/test_x.py::test_a[p]"),
        ("tests/alpha/beta/test_x.py::test_a[p]", 36, "tests/alpha/…/test_x.py::test_a[p]"),
        ("tests/alpha/beta/test_x.py::test_a[p]", 33, "tests/…/test_x.py::test_a[p]"),
        ("tests/alpha/beta/test_x.py::test_a[p]", 27, "…/test_x.py::test_a[p]"),
        ("tests/alpha/beta/test_x.py::test_a[p]", 21, None),  # the parameters are never cut
        ("test_x.py::test_a[p]", 10, None),
        ("tests/test_x.py", 14, "…/test_x.py"),  # a module-level id
    ],
)
def test_shortening_drops_folders_only(test_id: str, width: int, expected: str | None) -> None:
    assert shorten_test_id(test_id, width) == expected


LONG_FILE = "tests/perf/attention/test_flash_attention.py"
LONG_NAME = "test_flash_attention_forward"


def _long_ids_session() -> SessionResults:
    """Parametrized ids longer than an 80-column log, and an unchanged memory change past its threshold."""
    slow = measurement(f"{LONG_FILE}::{LONG_NAME}[bfloat16-batch8-heads32-seqlen8192-causal]", "default", 331_000.0)
    slow_base = baseline(slow, 207_000.0)
    same = measurement(f"{LONG_FILE}::{LONG_NAME}[float16-batch8-heads32-seqlen8192-causal]", "default", 208_000.0)
    same_base = baseline(same, 207_000.0)
    grown = Comparison(
        same.key, "memory.peak_allocated", Verdict.UNCHANGED, 1_536 * 1024, baseline=984 * 1024, unit="B",
        change=1536 / 984 - 1, threshold=0.05, note="a rise of 552.0 KiB is below the 1.0 MiB floor",
    )  # fmt: skip
    fresh = measurement("tests/test_mm.py::test_mm", "default", 5_000.0)
    results = (
        MeasurementResult(slow, (time_cmp(slow, slow_base, Verdict.REGRESSION, threshold=0.1),), slow_base),
        MeasurementResult(same, (time_cmp(same, same_base, Verdict.UNCHANGED, threshold=0.1), grown), same_base),
        MeasurementResult(fresh),
    )
    return dataclasses.replace(make_session(), results=results, compare_ref=None, mode="baseline")


DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("width", [80, 200])
def test_long_parametrized_ids_golden(width: int) -> None:
    """At 80 columns (CI logs) each id gets a line of its own, whole; at 200 rows fit on one line."""
    out = io.StringIO()
    render_summary(_long_ids_session(), PlainWriter(out, color=False, width=width))
    assert out.getvalue() == (DATA / f"summary_long_ids_{width}.txt").read_text(encoding="utf-8")


def test_an_unchanged_memory_change_past_its_threshold_gets_a_line_from_the_real_gate() -> None:
    """+56% peak memory that the gate calls unchanged (under its byte floor) is shown, not hidden."""
    m = compare_measurement(peak_allocated_bytes=936_000)
    base = compare_entry(peak_allocated_bytes=600_000)
    comparisons = compare(m, base, GateSettings(memory_threshold=0.05))
    memory = next(c for c in comparisons if c.metric == "memory.peak_allocated")
    assert memory.verdict is Verdict.UNCHANGED and memory.change == pytest.approx(0.56)
    session = dataclasses.replace(make_session(), results=(MeasurementResult(m, comparisons, base),))
    tw = RecordingWriter(fullwidth=120)
    render_summary(session, tw)
    line, markup = tw.find("memory.peak_allocated")
    assert line == (
        "    memory.peak_allocated: 914.1 KiB vs 585.9 KiB (+56.0%) unchanged: +56.0% is past the memory threshold "
        "5.0%, but +328.1 KiB is below the 1.000 MiB floor under which peak memory moves with the "
        "allocator's granularity"
    )  # the memory-growth rule says why it decided
    assert markup == {}
    # the note the gate gives, whatever its metric, is shown with it
    noted = dataclasses.replace(memory, note="below the 1.0 MiB floor")
    session = dataclasses.replace(session, results=(MeasurementResult(m, (comparisons[0], noted), base),))
    tw = RecordingWriter(fullwidth=120)
    render_summary(session, tw)
    assert tw.find("memory.peak_allocated")[0].endswith("(+56.0%) unchanged: below the 1.0 MiB floor")


def test_an_unchanged_comparison_within_its_threshold_stays_quiet() -> None:
    m = compare_measurement(peak_allocated_bytes=610_000)
    base = compare_entry(peak_allocated_bytes=600_000)
    comparisons = compare(m, base, GateSettings(memory_threshold=0.05))
    session = dataclasses.replace(make_session(), results=(MeasurementResult(m, comparisons, base),))
    tw = RecordingWriter(fullwidth=120)
    render_summary(session, tw)
    assert not any("memory" in text for text, _ in tw.lines)


def test_green_counts_without_regressions_and_empty_session() -> None:
    session = make_session()
    calm = SessionResults(
        results=tuple(r for r in session.results if r.verdict.value in ("unchanged", "improvement")),
        environment=session.environment,
        provenance=session.provenance,
        mode="baseline",
        started_at=session.started_at,
    )
    tw = RecordingWriter(fullwidth=120)
    render_summary(calm, tw)
    assert tw.lines[0][0] == "=== gpuperf (baseline) ==="
    assert tw.lines[-1] == (
        "gpuperf: 0 regressions, 1 improvement, 1 unchanged, 0 new, 0 not comparable",
        {"bold": True, "green": True},
    )
    empty = RecordingWriter(fullwidth=120)
    render_summary(SessionResults((), session.environment, session.provenance, "baseline", "now"), empty)
    assert [text for text, _ in empty.lines][1:] == ["no measurements"]


def test_plain_writer_colours_only_when_asked() -> None:
    out = io.StringIO()
    render_summary(make_session(), PlainWriter(out, color=False, width=120))
    text = out.getvalue()
    assert "\x1b[" not in text
    assert text.splitlines()[0].startswith("=") and "compared with origin/main" in text.splitlines()[0]
    coloured = io.StringIO()
    render_summary(make_session(), PlainWriter(coloured, color=True, width=120))
    assert "\x1b[31m" in coloured.getvalue()  # the regression row in red


def test_the_energy_per_call_is_a_line_under_its_row_with_where_it_came_from() -> None:
    tw = RecordingWriter(fullwidth=140)
    render_summary(device_session(), tw)
    line = tw.find("energy per call")[0]
    assert line == "    energy per call: 620.0 mJ vs 600.0 mJ (+3.3%) unchanged (NVML energy counter)"
    tw = RecordingWriter(fullwidth=140)
    render_summary(device_session(EnergySource.POWER), tw)
    assert tw.find("energy per call")[0].endswith("unchanged (NVML power readings, an estimate)")
    tw = RecordingWriter(fullwidth=140)
    render_summary(make_session(), tw)
    assert not [text for text, _ in tw.lines if "energy" in text]
