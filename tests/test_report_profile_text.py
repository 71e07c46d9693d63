"""Why it got slower, in the failure message and the terminal summary (report/why.py, failure.py, terminal.py)."""

from __future__ import annotations

import io

from test_report_profile_helpers import (
    BASE_LABEL,
    CUBLAS_GEMM,
    MLP_BASE,
    cpu_extra_op_diff,
    cpu_under_the_cut_diff,
    cuda_host_side_diff,
    cuda_kernel_swap_diff,
    no_base_diff,
    op,
    regressed,
    session_of,
)

from pytest_gpuperf.model import OpProfile
from pytest_gpuperf.profiling.diff import diff_profiles
from pytest_gpuperf.report.failure import failure_message
from pytest_gpuperf.report.terminal import PlainWriter, render_summary
from pytest_gpuperf.report.why import why_lines


def _why_block(message: str) -> list[str]:
    """The failure message's lines from its "why" heading to the device line."""
    lines = message.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("why ("))
    end = next(i for i, line in enumerate(lines) if line.startswith("  device:"))
    return lines[start:end]


def test_the_failure_message_names_the_added_op_first_under_the_regression() -> None:
    message = failure_message(regressed(cpu_extra_op_diff()), "cpu")
    lines = message.splitlines()
    assert lines.index("  time.p50: 200.0 us -> 250.0 us (+25.0%)") < lines.index(
        "  why (profile vs baseline 1f3c9e2, CPU time per call):"
    )
    assert _why_block(message) == [
        "  why (profile vs baseline 1f3c9e2, CPU time per call):",
        "    5 profiled calls a side",
        "    +412.0 us [+397.9 us, +426.1 us] aten::gelu (added, 1 call)",
        "    +6.125 us [+5.954 us, +6.296 us] aten::copy_ (calls 1 -> 2)",  # the extra call at the time of one
        "    +21.30 us [+8.710 us, +33.89 us] rest (the measured change less the rows above)",
        "    ... 5 more in the reports",
        "    traces: head gpuperf-profiles/test_mlp.head.json, base gpuperf-profiles/test_mlp.base.json"
        " (open in https://ui.perfetto.dev)",
    ]


def test_an_op_under_the_bases_cut_reads_as_grown_from_under_it_with_an_unknown_count() -> None:
    block = _why_block(failure_message(regressed(cpu_under_the_cut_diff()), "cpu"))
    # the base may have had it at up to its 2 us cut: the interval's low end is that much lower
    assert block[2] == "    +412.0 us [+395.9 us, +426.1 us] aten::gelu (from under the base's cut, now 1 call)"


def test_only_the_top_three_rows_and_a_count_of_the_rest() -> None:
    block = _why_block(failure_message(regressed(cuda_kernel_swap_diff()), "cuda:0"))
    rows = block[2:6]
    assert rows[0].startswith("    +262.0 us [+254.0 us, +270.0 us] cutlass::Kernel2<cutlass_80_wmma_tensor")
    assert rows[0].endswith("(kernel, added, 1 call)")
    assert rows[1].startswith("    -181.0 us [-186.5 us, -175.5 us] sm90_xmma_gemm_bf16bf16_bf16f32")  # the pair's half
    assert rows[1].endswith("(kernel, removed, was 1 call, replaced by the row above)")
    assert CUBLAS_GEMM not in rows[1] and "::Params" not in rows[0]  # shortened, not cut off at the edge
    assert rows[2].endswith("vectorized_elementwise_kernel<4, CUDAFunctor_add<…>, Array<…> > (kernel, slower per call)")
    assert rows[3].startswith(
        "    +0.000 ns [-5.733 us, +5.733 us] rest"
    )  # kernels only: aten::mm's device time is theirs
    assert block[6] == "    ... 1 more in the reports"
    assert block[7] == (
        "    device +42.4% (+84.00 us), host +2.1% (+1.000 us): the slowdown is on the device (kernel time)"
    )


def test_a_host_side_slowdown_is_named_as_host_time() -> None:
    block = _why_block(failure_message(regressed(cuda_host_side_diff()), "cuda:0"))
    assert block == [
        "  why (profile vs baseline 1f3c9e2, CPU time per call):",  # host-bound: the rows compare host time
        "    5 profiled calls a side",
        "    nothing stands out: no operator's change is resolved beyond the profile's noise; the change is spread"
        " over many, the largest below with their intervals",
        "    +41.00 us [+39.22 us, +42.78 us] rest (the measured change less the rows above)",
        "    +0.000 ns [-207.5 ns, +207.5 ns] aten::mm (operator, unchanged, within the profile's noise)",
        "    device +0.0% (+20.00 ns), host +82.0% (+41.00 us): the slowdown is host-side (launch overhead, Python)",
    ]


def test_without_a_base_profile_the_heads_ops_and_the_note() -> None:
    block = _why_block(failure_message(regressed(no_base_diff()), "cpu"))
    assert block[0] == "  why (profile of the head alone, CPU time per call):"
    assert block[1] == "    180.0 us aten::addmm (2 calls)"
    assert block[-1] == f"    {BASE_LABEL} has no stored profile: the head's top rows alone"
    assert not any(line.lstrip().startswith("+") for line in block)


def test_no_why_without_a_profile_diff() -> None:
    assert "why (" not in failure_message(regressed(None), "cpu")


def test_op_names_reach_the_terminal_without_escape_sequences() -> None:
    hostile = "aten::gelu\x1b[2J\x1b]8;;https://x.test\x07link\x1b]8;;\x07\nnext"
    head = OpProfile("cpu", 5, 1000.0, ops=(*MLP_BASE, op(hostile, 1, 412.0)))
    diff = diff_profiles(head, OpProfile("cpu", 5, 600.0, ops=MLP_BASE), base_label="baseline \x1b[31mred")
    message = failure_message(regressed(diff), "cpu")
    out = io.StringIO()
    render_summary(session_of(regressed(diff)), PlainWriter(out, color=False, width=120))
    for text in (message, out.getvalue()):
        assert "\x1b" not in text and "\x07" not in text
        assert "+412.0 us [no interval] aten::gelulink next (added, 1 call)" in text
        assert "baseline red" in text


def test_the_terminal_shows_the_failure_messages_lines_under_the_regressed_row() -> None:
    results = [regressed(diff, f"tests/perf/test_{i}.py::test_x") for i, diff in enumerate(
        [cpu_extra_op_diff(), cuda_kernel_swap_diff(), cuda_host_side_diff(), no_base_diff()]
    )]  # fmt: skip
    out = io.StringIO()
    render_summary(session_of(*results, regressed(None, "tests/perf/test_plain.py::test_x")),
                   PlainWriter(out, color=False, width=200))  # fmt: skip
    lines = out.getvalue().splitlines()
    for result in results:
        row = next(i for i, line in enumerate(lines) if line.startswith(result.measurement.test_id))
        block = [line.strip() for line in _why_block(failure_message(result, "cpu"))]
        assert [line.strip() for line in lines[row + 1 : row + 1 + len(block)]] == block
    assert sum(line.lstrip().startswith("why (") for line in lines) == len(results)


def test_why_lines_indent_every_line_but_the_heading() -> None:
    lines = why_lines(cpu_extra_op_diff(), indent="> ")
    assert lines[0].startswith("why (")
    assert all(line.startswith("> ") for line in lines[1:])
