"""The differential profile in the PR comment, rendered by cmark-gfm as GitHub renders comments.

GitHub renders with cmark-gfm and its extensions, raw HTML allowed, then
sanitizes (``<details>``, ``<summary>``, ``<code>`` and tables survive). The
rendered page is parsed as XML: a section that did not close, or a table that
fell out of its ``<details>``, fails the parse or the checks.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_report_profile_helpers import (
    ADD_KERNEL,
    CUBLAS_GEMM,
    CUTLASS_GEMM,
    GELU_KERNEL,
    MLP_BASE,
    cpu_extra_op_diff,
    cpu_under_the_cut_diff,
    cuda_host_side_diff,
    cuda_kernel_swap_diff,
    disagreeing_diff,
    kernel,
    no_base_diff,
    op,
    regressed,
    session_of,
)

from pytest_gpuperf.model import OpProfile, ProfileDiff, SessionResults
from pytest_gpuperf.profiling.diff import diff_profiles
from pytest_gpuperf.report import markdown
from pytest_gpuperf.report.markdown import WHY_BUDGET, WHY_ROWS, render_comment
from pytest_gpuperf.report.why import short_name

ACTION = Path(__file__).resolve().parents[1] / "action"
sys.path.append(str(ACTION))  # the action's scripts import each other as top-level modules
import body  # noqa: E402


def github_html(text: str) -> ET.Element:
    cmarkgfm = pytest.importorskip("cmarkgfm")  # in the dev extras; the size test below runs without it
    from cmarkgfm.cmark import Options

    page = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    return ET.fromstring(f"<page>{page}</page>")


def _text(element: ET.Element | None) -> str:
    assert element is not None
    return "".join(element.itertext()).strip()


def why_sections(page: ET.Element) -> dict[str, ET.Element]:
    return {_text(d.find("summary")): d for d in page.iter("details") if _text(d.find("summary")).startswith("Why ")}


def _rows(table: ET.Element) -> list[list[str]]:
    return [[_text(cell) for cell in row] for row in table.iter("tr")]


def _four_regressions() -> SessionResults:
    return session_of(
        regressed(cpu_extra_op_diff()),
        regressed(cuda_kernel_swap_diff(), "tests/perf/test_mm.py::test_mm[bf16-4096]"),
        regressed(cuda_host_side_diff(), "tests/perf/test_launch.py::test_small_kernels"),
        regressed(no_base_diff(), "tests/perf/test_old.py::test_y"),
        regressed(None, "tests/perf/test_plain.py::test_z"),
    )


def test_each_profiled_regression_is_a_collapsed_section_with_a_real_table() -> None:
    page = github_html(render_comment(_four_regressions()))
    sections = why_sections(page)
    assert list(sections) == [
        "Why test_launch.py::test_small_kernels got slower: host-side, +41.00 us",
        "Why test_mlp.py::test_forward got slower: +412.0 us aten::gelu (added, 1 call)",
        "Why test_mm.py::test_mm[bf16-4096] got slower: +262.0 us "
        "cutlass::Kernel2<cutlass_80_wmma_tensor…_s161616gemm_bf16_32x32_128x2_tn_align8> (added, 1 call), "
        "replacing sm90_xmma_gemm_bf16bf16_bf16f…egment_k_off_kernel__5x_cublas (-181.0 us)",
        "Why test_old.py::test_y got slower",
    ]
    assert all("open" not in d.attrib for d in sections.values())  # collapsed
    mlp = sections["Why test_mlp.py::test_forward got slower: +412.0 us aten::gelu (added, 1 call)"]
    (table,) = mlp.iter("table")
    noise = "within the profile's noise"
    assert _rows(table)[:5] == [
        ["op", "kind", "change per call", "interval", "base", "head", "calls", "reading"],
        ["aten::gelu", "operator", "+412.0 us", "[+397.9 us, +426.1 us]", "-", "412.0 us", "0 → 1", "added, 1 call"],
        ["aten::copy_", "operator", "+6.125 us", "[+5.954 us, +6.296 us]", "6.000 us", "12.50 us", "1 → 2",
         "calls 1 -> 2"],
        ["rest", "rest", "+21.30 us", "[+8.710 us, +33.89 us]", "", "", "",
         "the measured change less the rows above"],
        ["aten::copy_", "operator", "+375.0 ns", "[-10.94 ns, +760.9 ns]", "6.000 us", "12.50 us", "1 → 2",
         f"slower per call, {noise}"],
    ]  # fmt: skip
    assert [_text(c) for c in table.iter("code")][:3] == ["aten::gelu", "aten::copy_", "rest"]
    first = _text(mlp.find("p"))
    assert first == "Profile vs baseline 1f3c9e2, CPU time per call. 5 profiled calls a side."
    traces = [a.attrib["href"] for a in mlp.iter("a")]
    assert traces == ["https://ui.perfetto.dev"]


def test_an_op_under_the_bases_cut_shows_the_cut_and_an_unknown_count() -> None:
    sections = why_sections(github_html(render_comment(session_of(regressed(cpu_under_the_cut_diff())))))
    (section,) = sections.values()
    assert _rows(next(section.iter("table")))[1] == [
        "aten::gelu", "operator", "+412.0 us", "[+395.9 us, +426.1 us]", "?", "412.0 us", "? → 1",
        "from under the base's cut, now 1 call",
    ]  # fmt: skip


def test_cuda_sections_name_kernels_shortened_and_the_slower_side() -> None:
    sections = why_sections(github_html(render_comment(_four_regressions())))
    swap = next(d for title, d in sections.items() if "test_mm" in title)
    rows = _rows(next(swap.iter("table")))
    assert [row[:2] for row in rows[1:4]] == [  # device time: kernels only, the replaced one beside its successor
        ["cutlass::Kernel2<cutlass_80_wmma_tensor…_s161616gemm_bf16_32x32_128x2_tn_align8>", "kernel"],
        ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_…_execute_segment_k_off_kernel__5x_cublas", "kernel"],
        ["at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<…>, Array<…> >", "kernel"],
    ]
    assert rows[2][2:] == ["-181.0 us", "[-186.5 us, -175.5 us]", "181.0 us", "-", "1 → 0",
                           "removed, was 1 call, replaced by the row above"]  # fmt: skip
    assert "the slowdown is on the device (kernel time)" in _text(swap.find("p"))
    launch = next(d for title, d in sections.items() if "test_launch" in title)
    assert [_text(p) for p in launch.iter("p")] == [
        "Profile vs baseline 1f3c9e2, CPU time per call. 5 profiled calls a side. Nothing stands out: no operator's "
        "change is resolved beyond the profile's noise; the change is spread over many, the largest below with their "
        "intervals. Device +0.0% (+20.00 ns), host +82.0% (+41.00 us): the slowdown is host-side (launch overhead, "
        "Python).",
    ]
    assert [row[0] for row in _rows(next(launch.iter("table")))[1:]] == ["rest", "aten::mm"]


def test_without_a_base_profile_the_table_shows_the_heads_time_and_the_note() -> None:
    sections = why_sections(github_html(render_comment(_four_regressions())))
    old = sections["Why test_old.py::test_y got slower"]
    rows = _rows(next(old.iter("table")))
    assert rows[0] == ["op", "kind", "time per call", "calls"]
    assert rows[1] == ["aten::addmm", "operator", "180.0 us", "2"]
    assert "has no stored profile: the head's top rows alone" in _text(old)


def test_a_long_diff_keeps_its_top_rows_and_counts_the_rest() -> None:
    many = tuple(op(f"aten::op_{i}", 1, 10.0 + i) for i in range(WHY_ROWS + 7))
    diff = diff_profiles(OpProfile("cpu", 5, 1e6, ops=many), OpProfile("cpu", 5, 1e5, ops=MLP_BASE), base_label="b")
    (section,) = why_sections(github_html(render_comment(session_of(regressed(diff))))).values()
    assert len(_rows(next(section.iter("table")))) == 1 + WHY_ROWS
    assert f"{len(diff.rows) - WHY_ROWS} more rows in the HTML report and the results JSON." in _text(section)


def test_hostile_names_stay_text_and_keep_the_tables_columns() -> None:
    evil = "aten::x|<script>alert(1)</script> @octocat #12 `tick` [link](https://evil.test)"
    base = OpProfile("cpu", 5, 300.0, ops=MLP_BASE)
    diff = diff_profiles(
        OpProfile("cpu", 5, 900.0, ops=(*MLP_BASE, op(evil, 1, 500.0))), base,
        base_label="ref @octocat/<b>x</b>", head_trace="traces/<img src=x>.json",
    )  # fmt: skip
    result = regressed(diff, "tests/t.py::test_[@octocat <i>]")
    page = github_html(render_comment(session_of(result)))
    assert not [e.tag for e in page.iter() if e.tag in ("script", "img", "b", "i")]
    assert [a.attrib["href"] for a in page.iter("a")] == ["https://ui.perfetto.dev"]
    (section,) = why_sections(page).values()
    assert all(len(row) == 8 for row in _rows(next(section.iter("table"))))
    codes = [_text(c) for c in section.iter("code")]
    assert codes[:3] == ["t.py::test_[@octocat <i>]", short_name(evil), short_name(evil)]  # summary, table
    prose = " ".join(_text(p) for p in section.iter("p"))
    assert "@\u200docto" in prose  # the mention in the base label is broken; in code it is inert anyway


def _long_cuda_diff(i: int) -> ProfileDiff:
    """A 30-kernel diff with the longest real names: the worst case for the comment's size."""
    names = [CUBLAS_GEMM, CUTLASS_GEMM, GELU_KERNEL, ADD_KERNEL]
    base = tuple(kernel(f"{names[k % 4]}_{k}", 1, 10.0) for k in range(30))
    head = tuple(kernel(f"{names[k % 4]}_{k}", 1 + k % 2, 10.0 + k + i) for k in range(30))
    return diff_profiles(
        OpProfile("cuda", 5, 9e4, 4e5, ops=head), OpProfile("cuda", 5, 8e4, 3e5, ops=base),
        base_label=f"ref main ({i:07x})", head_trace=f"gpuperf-profiles/test_{i}.head.json",
        base_trace=f"gpuperf-profiles/test_{i}.base.json",
    )  # fmt: skip


def test_many_regressions_keep_the_comment_within_githubs_limit() -> None:
    results = [regressed(_long_cuda_diff(i), f"tests/perf/test_model_{i:03}.py::test_forward") for i in range(120)]
    session = session_of(*results)
    text = render_comment(session)
    sections = [s for s in text.split("<details>") if s.lstrip().startswith("<summary>Why")]
    assert sum(len(s) for s in sections) <= WHY_BUDGET
    assert 3 <= len(sections) < len(results)
    assert f"Differential profiles of {len(results) - len(sections)} more regressed tests" in text
    assert "<summary>Environment</summary>" in text
    outcome = body.Outcome(key="gpu", exit_code=1, report=text, link="https://github.com/o/r/actions/runs/1")
    comment = body.comment_body(outcome)
    assert body.utf16_units(comment) <= body.COMMENT_LIMIT
    assert "Truncated" not in comment  # the budget kept it whole: nothing was cut off by the action
    unbounded = "\n".join(markdown.why_sections(session, budget=10**9))
    assert body.utf16_units(unbounded) > body.COMMENT_LIMIT  # without the budget, the action would cut


def test_a_profile_that_disagrees_with_the_measurement_is_one_sentence_not_a_table() -> None:
    (section,) = why_sections(github_html(render_comment(session_of(regressed(disagreeing_diff()))))).values()
    assert not list(section.iter("table"))
    prose = _text(section.find("p"))
    assert "apart beyond both intervals, the profile cannot say why" in prose
    assert "Measured +50.00 us [+44.00 us, +56.00 us] per call" in prose
    assert "aten::gelu" not in prose
