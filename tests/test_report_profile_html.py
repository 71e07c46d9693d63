"""The differential profile in the HTML report: a bar chart of the top changes and a table of every row."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chromium import run_chromium
from matplotlib import image as mpl_image
from matplotlib.colors import to_rgb
from matplotlib.patches import Rectangle
from test_report_profile_helpers import (
    MLP_BASE,
    cpu_extra_op_diff,
    cuda_host_side_diff,
    cuda_kernel_swap_diff,
    disagreeing_diff,
    no_base_diff,
    op,
    regressed,
    session_of,
)

from pytest_gpuperf.model import OpProfile, SessionResults
from pytest_gpuperf.profiling.diff import diff_profiles
from pytest_gpuperf.report import write_reports
from pytest_gpuperf.report.history import STEP_DOWN, STEP_UP
from pytest_gpuperf.report.html import WHY_BARS, render_html, why_figure
from pytest_gpuperf.report.why import short_name


class _Sections(HTMLParser):
    """Each ``<section class="why">``: its table's rows (cell texts), paragraphs and image alts."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[dict[str, list[Any]]] = []
        self._depth = 0
        self._cell: list[str] | None = None
        self._text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section" and ("class", "why") in attrs:
            self.sections.append({"rows": [], "paragraphs": [], "images": []})
            self._depth = 1
        elif tag == "section" and self._depth:
            self._depth += 1
        if not self._depth:
            return
        current = self.sections[-1]
        if tag == "tr":
            current["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "p":
            self._text = []
        elif tag == "img":
            current["images"].append(dict(attrs)["alt"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "section" and self._depth:
            self._depth -= 1
        elif tag in ("td", "th") and self._cell is not None:
            self.sections[-1]["rows"][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "p" and self._text is not None:
            self.sections[-1]["paragraphs"].append("".join(self._text))
            self._text = None

    def handle_data(self, data: str) -> None:
        for sink in (self._cell, self._text):
            if sink is not None:
                sink.append(data)


def why_sections(page: str) -> list[dict[str, list[Any]]]:
    parser = _Sections()
    parser.feed(page)
    return parser.sections


def _session() -> SessionResults:
    return session_of(
        regressed(cpu_extra_op_diff()),
        regressed(cuda_kernel_swap_diff(), "tests/perf/test_mm.py::test_mm[bf16-4096]"),
        regressed(cuda_host_side_diff(), "tests/perf/test_x.py::test_launch"),
        regressed(no_base_diff(), "tests/perf/test_old.py::test_y"),
        regressed(None, "tests/perf/test_plain.py::test_z"),
    )


def test_each_profiled_regression_gets_a_chart_and_a_table_of_every_row() -> None:
    sections = why_sections(render_html(_session()))
    assert len(sections) == 4  # in the report's order: by key among equal verdicts
    mlp, swap, old, launch = sections
    assert mlp["rows"][:3] == [
        ["op", "kind", "change per call", "interval", "base", "head", "calls", "reading"],
        ["aten::gelu", "operator", "+412.0 us", "[+397.9 us, +426.1 us]", "-", "412.0 us", "0 → 1", "added, 1 call"],
        ["aten::copy_", "operator", "+6.125 us", "[+5.954 us, +6.296 us]", "6.000 us", "12.50 us", "1 → 2",
         "calls 1 -> 2"],
    ]  # fmt: skip
    assert mlp["images"] == ["why tests/perf/test_mlp.py::test_forward::default got slower"]
    assert mlp["paragraphs"][0] == "Profile vs baseline 1f3c9e2, CPU time per call. 5 profiled calls a side."
    assert "traces: head gpuperf-profiles/test_mlp.head.json" in mlp["paragraphs"][1]
    assert len(swap["rows"]) == 1 + len(cuda_kernel_swap_diff().rows)  # every row, the noise's too
    assert "the slowdown is on the device (kernel time)" in swap["paragraphs"][0]
    assert old["rows"][0] == ["op", "kind", "time", "calls"]
    assert "has no stored profile" in old["paragraphs"][-1]
    assert [row[0] for row in launch["rows"][1:]] == ["rest", "aten::mm"]
    assert "Nothing stands out" in launch["paragraphs"][0]
    assert "the slowdown is host-side (launch overhead, Python)" in launch["paragraphs"][0]


def test_the_chart_is_a_waterfall_from_the_base_to_the_head_one_bar_per_row() -> None:
    diff = cuda_kernel_swap_diff()
    ax = why_figure(diff).axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    shown = [r for r in diff.rows if r.role != "noise"]  # the causes, the replaced kernel and the rest
    assert [r.role for r in shown] == ["cause", "replaced", "cause", "rest"]
    assert [round(b.get_width(), 3) for b in bars] == [round(r.delta_ns / 1e3, 3) for r in shown]
    # each bar starts where the one before it ended: the last ends at the head's change
    assert [round(b.get_x(), 3) for b in bars] == [0.0, 262.0, 81.0, 84.0]
    assert [b.get_facecolor()[:3] for b in bars[:3]] == [to_rgb(STEP_UP), to_rgb(STEP_DOWN), to_rgb(STEP_UP)]
    assert [t.get_text() for t in ax.get_yticklabels()] == [short_name(r.name, 60) for r in shown[:3]] + ["rest"]
    assert ax.yaxis_inverted()  # the first row on top
    assert ax.get_xlabel() == "change in device time per call from the base's (us)"


def test_the_chart_keeps_the_top_rows_and_without_a_base_shows_the_heads_time() -> None:
    many = tuple(op(f"aten::op_{i}", 1, 10.0 + i) for i in range(WHY_BARS + 5))
    diff = diff_profiles(OpProfile("cpu", 5, 1e6, ops=many), OpProfile("cpu", 5, 1e5, ops=MLP_BASE), base_label="b")
    assert len(why_figure(diff).axes[0].patches) == WHY_BARS
    head_only = why_figure(no_base_diff()).axes[0]
    assert head_only.get_xlabel() == "CPU time per call (us)"
    widths = [round(b.get_width(), 3) for b in head_only.patches if isinstance(b, Rectangle)]
    assert widths == [180.0, 12.0, 6.0, 3.0, 1.5]


def test_op_names_and_labels_are_escaped() -> None:
    evil = "aten::x<script>alert(1)</script>"
    diff = diff_profiles(
        OpProfile("cpu", 5, 900.0, ops=(*MLP_BASE, op(evil, 1, 500.0))), OpProfile("cpu", 5, 300.0, ops=MLP_BASE),
        base_label="ref <b>main</b>", head_trace="t/<img src=x>.json",
    )  # fmt: skip
    page = render_html(session_of(regressed(diff)))
    assert "<script" not in page and "<b>main" not in page and "<img src=x" not in page
    assert "ref &lt;b&gt;main&lt;/b&gt;" in page and "t/&lt;img src=x&gt;.json" in page


def test_chromium_draws_the_bars(tmp_path: Path) -> None:
    page = write_reports(session_of(regressed(cuda_kernel_swap_diff())), {"html": tmp_path / "report.html"}).written[0]
    shot = tmp_path / "shot.png"
    done = run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri())
    if done.returncode != 0 or not shot.is_file():
        pytest.fail(done.stderr[-2000:])
    pixels = mpl_image.imread(shot)[..., :3]
    for colour in (STEP_UP, STEP_DOWN):  # a slower and a faster bar, decoded and on screen
        assert np.all(np.abs(pixels - np.array(to_rgb(colour))) < 0.02, axis=-1).sum() > 500, colour


def test_a_profile_that_disagrees_with_the_measurement_gets_a_sentence_and_no_chart() -> None:
    (section,) = why_sections(render_html(session_of(regressed(disagreeing_diff()))))
    assert section["images"] == [] and section["rows"] == []
    assert "the profile cannot say why" in section["paragraphs"][0]
