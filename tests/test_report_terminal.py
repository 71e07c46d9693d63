from __future__ import annotations

import io

import pytest
from test_report_helpers import make_session

from pytest_gpuperf.model import SessionResults
from pytest_gpuperf.report.terminal import PlainWriter, render_summary


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
    assert header.split() == ["test", "measurement", "p50", "now", "baseline", "change", "precision", "verdict"]
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


def test_regressions_come_first_and_counts_close_the_table() -> None:
    tw = RecordingWriter(fullwidth=140)
    render_summary(make_session(), tw)
    assert "regression" in tw.lines[2][0]
    last, markup = tw.lines[-1]
    assert last == "gpuperf: 1 regression, 1 improvement, 1 unchanged, 1 new, 1 not comparable, 1 unstable"
    assert markup == {"bold": True, "red": True}


def _table(width: int) -> list[str]:
    tw = RecordingWriter(fullwidth=width)
    render_summary(make_session(), tw)
    return [text for text, _ in tw.lines[1:] if not text.startswith((" ", "gpuperf:"))]


@pytest.mark.parametrize("width", [90, 120, 200])
def test_columns_fit_the_terminal(width: int) -> None:
    table = _table(width)
    assert max(len(line) for line in table) <= width
    longest_id = "tests/perf/test_matmul.py::test_matmul[fp16-4096]"
    # Ids are shortened from the left (keeping the test name) only when they must be.
    assert any(longest_id in line for line in table) == (width >= 120)
    assert any("…" in line for line in table) == (width < 120)
    # Numbers stay right-aligned under their header.
    end_of_change = table[0].index("change") + len("change")
    assert {line[end_of_change - 1] for line in table[1:]} <= {"%", "-"}


def test_test_column_never_shrinks_below_a_readable_minimum() -> None:
    table = _table(40)
    assert table[1].startswith("…tmul[fp16-4096]  default")


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
