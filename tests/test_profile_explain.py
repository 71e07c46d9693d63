"""A regression's explanation (profiling/explain.py): the rank, intervals, replacements, rows that add up, the sign."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from pytest_gpuperf.model import MeasuredChange, OpProfile, OpStat, WhyRow
from pytest_gpuperf.profiling.diff import diff_profiles
from pytest_gpuperf.profiling.explain import REST, explain, leading, mean_difference
from pytest_gpuperf.profiling.plan import ProfilePlan
from pytest_gpuperf.report.why import headline, shown_rows, table_rows, why_lines

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _same_draws() -> None:
    """Each test draws the same calls however the tests are selected or ordered."""
    global RNG
    RNG = np.random.default_rng(7)


def op(name: str, calls: float, per_call_us: list[float] | np.ndarray, kind: str = "operator") -> OpStat:
    ns = tuple(float(v) * 1e3 for v in per_call_us)
    if kind == "kernel":
        return OpStat(name, "kernel", calls, 0.0, float(np.mean(ns)), (), ns)
    return OpStat(name, "operator", calls, float(np.mean(ns)), 0.0, ns)


def cpu(*ops: OpStat) -> OpProfile:
    """A CPU profile whose per-call totals are the sum of its rows' (as a real table's are)."""
    totals = tuple(float(v) for v in np.sum([s.host_samples_ns for s in ops], axis=0))
    return OpProfile("cpu", len(totals), float(np.mean(totals)), ops=ops, host_samples_ns=totals)


def noisy(mean_us: float, spread: float = 0.02, n: int = 20) -> np.ndarray:
    """``n`` profiled calls' times around ``mean_us``, with a relative spread."""
    return mean_us * (1 + spread * RNG.standard_normal(n))


def measured(profile_head: OpProfile, profile_base: OpProfile, half: float = 0.2) -> MeasuredChange:
    delta = profile_head.host_ns - profile_base.host_ns
    return MeasuredChange(delta, delta - half * abs(delta), delta + half * abs(delta))


def test_the_welch_interval_is_scipys() -> None:
    head, base = noisy(105.0, 0.05, 12), noisy(100.0, 0.05, 9)
    estimate, low, high = mean_difference(head, base, 0.95)
    ci = stats.ttest_ind(head, base, equal_var=False).confidence_interval(0.95)
    assert (estimate, low, high) == pytest.approx((head.mean() - base.mean(), ci.low, ci.high))
    assert mean_difference([1.0], [2.0, 3.0], 0.95)[1:] == (None, None)  # one call: no interval


def test_one_more_call_leads_with_the_count_and_the_time_it_accounts_for() -> None:
    """The issue's case: matmul called 21 times instead of 20, its per-call time noisy on a busy host."""
    base = cpu(op("aten::mm", 20, noisy(200.0, 0.15)), op("aten::resolve_conj", 60, noisy(8.0, 0.3)),
               op("aten::add", 1, noisy(50.0)))  # fmt: skip
    head = cpu(op("aten::mm", 21, noisy(210.0, 0.15)), op("aten::resolve_conj", 63, noisy(8.4, 0.3)),
               op("aten::add", 1, noisy(50.0)))  # fmt: skip
    diff = diff_profiles(head, base, base_label="ref", measured=measured(head, base))
    first = diff.rows[0]
    assert (first.name, first.reading, first.role, first.exact) == ("aten::mm", "calls", "cause", True)
    assert (first.base_calls, first.head_calls) == (20, 21)
    assert first.delta_ns == pytest.approx(10_000.0, rel=0.05)  # one call's time: 1/20 of 200 us
    assert first.low_ns is not None and first.high_ns is not None and 0 < first.low_ns < first.high_ns
    assert all(r.delta_ns > 0 for r in diff.rows if r.role == "cause")
    assert diff.finding == "explained"
    line = why_lines(diff)[2]
    assert line.startswith("  +") and "aten::mm (calls 20 -> 21)" in line


def test_rows_and_the_rest_add_up_to_the_measured_change() -> None:
    base = cpu(op("aten::mm", 1, noisy(300.0)), op("aten::relu", 1, noisy(20.0)))
    head = cpu(op("aten::mm", 1, noisy(300.0)), op("aten::relu", 1, noisy(20.0)), op("aten::gelu", 1, noisy(40.0)))
    change = MeasuredChange(38_000.0, 35_000.0, 41_000.0)
    diff = diff_profiles(head, base, base_label="b", measured=change)
    above = [r for r in diff.rows[: [r.name for r in diff.rows].index(REST) + 1]]
    assert above[0].name == "aten::gelu" and above[0].reading == "appeared"
    assert sum(r.delta_ns for r in above) == pytest.approx(change.delta_ns)
    rest = above[-1]
    assert rest.low_ns == pytest.approx(change.low_ns - above[0].delta_ns)  # the rest carries the measured interval


def test_a_change_inside_the_profiles_noise_is_not_a_cause() -> None:
    base = cpu(op("aten::mm", 1, noisy(300.0, 0.2, 5)), op("aten::add", 1, noisy(30.0, 0.01, 5)))
    head = cpu(op("aten::mm", 1, noisy(303.0, 0.2, 5)), op("aten::add", 1, noisy(36.0, 0.01, 5)))
    diff = diff_profiles(head, base, base_label="b", measured=MeasuredChange(9_000.0, 4_000.0, 14_000.0))
    roles = {r.name: r.role for r in diff.rows}
    assert roles["aten::add"] == "cause"  # 6 us on 30, with 1% noise: resolved
    mm = next(r for r in diff.rows if r.name == "aten::mm")
    assert mm.role == "noise" and mm.low_ns is not None and mm.high_ns is not None and mm.low_ns < 0 < mm.high_ns
    assert diff.rows.index(mm) > [r.name for r in diff.rows].index(REST)  # listed inside the rest


def test_a_faster_op_is_never_the_first_row_of_a_regression() -> None:
    base = cpu(op("aten::bmm", 1, noisy(600.0, 0.005)), op("aten::copy_", 1, noisy(100.0, 0.005)))
    head = cpu(op("aten::bmm", 1, noisy(300.0, 0.005)), op("aten::copy_", 1, noisy(500.0, 0.005)))
    diff = diff_profiles(head, base, base_label="b", measured=MeasuredChange(90_000.0, 80_000.0, 100_000.0))
    assert diff.rows[0].name == "aten::copy_" and diff.rows[0].role == "cause"
    bmm = next(r for r in diff.rows if r.name == "aten::bmm")
    assert bmm.role == "offset" and diff.rows.index(bmm) > [r.name for r in diff.rows].index(REST)
    assert [r.role for r in diff.rows[:2]] == ["cause", "rest"]


def test_a_removed_op_reads_as_the_other_half_of_its_replacement() -> None:
    base = cpu(op("aten::to", 1, noisy(250.0, 0.01)), op("aten::mm", 1, noisy(300.0, 0.01)))
    head = cpu(op("aten::copy_", 1, noisy(330.0, 0.01)), op("aten::mm", 1, noisy(300.0, 0.01)))
    diff = diff_profiles(head, base, base_label="b", measured=MeasuredChange(80_000.0, 70_000.0, 90_000.0))
    assert [(r.name, r.reading, r.role) for r in diff.rows[:3]] == [
        ("aten::copy_", "appeared", "cause"),
        ("aten::to", "disappeared", "replaced"),
        (REST, "rest", "rest"),
    ]


def test_nothing_stands_out_when_no_row_is_resolved() -> None:
    names = [f"aten::op{i}" for i in range(12)]
    base = cpu(*(op(n, 1, noisy(20.0, 0.2, 5)) for n in names))
    head = cpu(*(op(n, 1, noisy(20.6, 0.2, 5)) for n in names))
    diff = diff_profiles(head, base, base_label="b", measured=MeasuredChange(7_000.0, 6_000.0, 8_000.0))
    assert diff.finding == "spread"
    assert diff.rows[0].role == "rest" and diff.rows[0].delta_ns == 7_000.0
    lines = why_lines(diff)
    assert "nothing stands out" in lines[2]
    assert len([line for line in lines if "within the profile's noise" in line]) == 3  # the largest few, with intervals


def test_a_profile_that_overstates_an_added_call_by_the_profilers_cost_still_explains_it() -> None:
    # two more matmuls: the profiler's per-op cost makes the profile's change 30% larger than the
    # measured one, apart beyond both (narrow) intervals, yet the same change: the rows stand
    base = cpu(op("aten::relu", 1, noisy(20.0, 0.01)))
    head = cpu(op("aten::relu", 1, noisy(20.0, 0.01)), op("aten::mm", 2, noisy(62.0, 0.01)))
    diff = diff_profiles(head, base, base_label="b", measured=MeasuredChange(48_000.0, 47_000.0, 49_000.0))
    assert diff.profile_change is not None and diff.profile_change.low_ns > 49_000.0
    assert diff.finding != "disagrees"
    assert (diff.rows[0].name, diff.rows[0].reading, diff.rows[0].role) == ("aten::mm", "appeared", "cause")


def test_a_profile_that_disagrees_with_the_measurement_says_so_instead_of_a_table() -> None:
    base = cpu(op("aten::mm", 1, noisy(300.0, 0.01)))
    head = cpu(op("aten::mm", 1, noisy(240.0, 0.01)))  # the profile says 20% faster
    diff = diff_profiles(head, base, base_label="b", measured=MeasuredChange(15_000.0, 12_000.0, 18_000.0))
    assert diff.finding == "disagrees" and diff.rows == ()
    lines = why_lines(diff)
    assert "apart beyond both intervals" in lines[2]
    assert not any("aten::mm" in line for line in lines)


def test_on_cuda_a_host_bound_change_is_explained_by_host_time_and_a_kernel_swap_by_device_time() -> None:
    def cuda(host: OpStat, *kernels: OpStat) -> OpProfile:
        device = tuple(float(v) for v in np.sum([k.device_samples_ns for k in kernels], axis=0))
        return OpProfile("cuda", len(device), host.host_ns, float(np.mean(device)), ops=(host, *kernels),
                         host_samples_ns=host.host_samples_ns, device_samples_ns=device)  # fmt: skip

    gemm = op("sm90_gemm", 1, noisy(180.0, 0.005), kind="kernel")
    slow_host = diff_profiles(cuda(op("aten::mm", 1, noisy(90.0, 0.01)), gemm),
                              cuda(op("aten::mm", 1, noisy(50.0, 0.01)), gemm), base_label="b")  # fmt: skip
    assert slow_host.basis == "host" and slow_host.rows[0].name == "aten::mm"
    cutlass = op("cutlass_gemm", 1, noisy(260.0, 0.005), "kernel")
    swap = diff_profiles(cuda(op("aten::mm", 1, noisy(50.0, 0.01)), cutlass),
                         cuda(op("aten::mm", 1, noisy(50.0, 0.01)), gemm), base_label="b")  # fmt: skip
    assert swap.basis == "device"
    assert [(r.name, r.role) for r in swap.rows[:2]] == [("cutlass_gemm", "cause"), ("sm90_gemm", "replaced")]


def test_a_stored_profile_without_samples_presents_no_time_change_as_a_cause() -> None:
    old = OpProfile("cpu", 3, 400_000.0, ops=(OpStat("aten::mm", "operator", 1, 300_000.0),
                                               OpStat("aten::add", "operator", 1, 100_000.0)))  # fmt: skip
    head = cpu(op("aten::mm", 1, noisy(360.0)), op("aten::add", 1, noisy(100.0)))
    diff = diff_profiles(head, old, base_label="baseline")
    assert diff.finding == "no-intervals"
    assert not [r for r in diff.rows if r.role == "cause"]
    assert "no per-call samples" in why_lines(diff)[2]


def test_the_plan_doubles_the_calls_until_settled_or_out_of_budget() -> None:
    plan = ProfilePlan(first=5, most=40, budget_s=10.0)
    assert plan.next_calls(5, 1.0, 1.0, "spread") == 10
    assert plan.next_calls(20, 3.0, 2.0, "partial") == 40  # 3 s spent + 4 s expected fit 10 s
    assert plan.next_calls(20, 5.0, 3.0, "spread") is None  # 5 s spent + 6 s expected > 10 s
    assert plan.next_calls(40, 1.0, 0.5, "spread") is None  # the most calls a side
    assert plan.next_calls(5, 0.1, 0.1, "explained") is None


def test_explain_uses_the_profiles_own_change_without_a_measurement() -> None:
    base = cpu(op("aten::mm", 1, noisy(300.0, 0.005)))
    head = cpu(op("aten::mm", 1, noisy(330.0, 0.005)))
    why = explain(head, base, None)
    assert why.profile_change is not None
    rest = next(r for r in why.rows if r.role == "rest")
    assert why.rows[0].delta_ns + rest.delta_ns == pytest.approx(why.profile_change.delta_ns)


def test_the_profiled_calls_grow_until_the_cause_is_resolved() -> None:
    """engine.with_profile_diff: both sides profiled over the same calls, doubled while the rows are unresolved."""
    from test_report_profile_helpers import regressed

    from pytest_gpuperf.engines.results import with_profile_diff
    from pytest_gpuperf.measure.profiled import ProfiledSide

    asked: list[tuple[str, int]] = []

    def side(name: str, gelu_us: float) -> Callable[[int], ProfiledSide]:
        def profile(calls: int) -> ProfiledSide:
            asked.append((name, calls))
            return ProfiledSide(
                cpu(op("aten::mm", 1, noisy(300.0, 0.01, calls)), op("aten::gelu", 1, noisy(gelu_us, 0.6, calls)))
            )

        return profile

    result = regressed(None)  # time.p50 200 us -> 250 us, the ratio's CI [1.22, 1.28]
    done = with_profile_diff(result, side("head", 150.0), side("base", 100.0), base_label="b")
    diff = done.profile_diff
    assert diff is not None and diff.measured == MeasuredChange(
        50_000.0, pytest.approx(44_000.0), pytest.approx(56_000.0)
    )
    counts = [calls for name, calls in asked if name == "head"]
    assert counts[0] == 5 and len(counts) > 1 and all(b == 2 * a for a, b in itertools.pairwise(counts))
    assert [calls for name, calls in asked if name == "base"] == counts
    assert diff.finding == "explained" and diff.rows[0].name == "aten::gelu"
    assert diff.head.profiled_calls == counts[-1]
    asked.clear()
    once = with_profile_diff(result, side("head", 150.0), side("base", 100.0), base_label="b",
                             plan=ProfilePlan(budget_s=0.0))  # fmt: skip
    assert [calls for _, calls in asked] == [5, 5] and once.profile_diff is not None


def test_a_kernel_launched_with_a_new_configuration_reads_as_that() -> None:
    def cuda(*kernels: OpStat) -> OpProfile:
        device = tuple(float(v) for v in np.sum([k.device_samples_ns for k in kernels], axis=0))
        host = (20_000.0,) * len(device)
        return OpProfile("cuda", len(device), 20_000.0, float(np.mean(device)), ops=kernels,
                         host_samples_ns=host, device_samples_ns=device)  # fmt: skip

    other = op("at::native::vectorized_elementwise_kernel", 1, noisy(30.0, 0.005), "kernel")
    before = op("sm90_gemm [grid 128x1x1, block 256x1x1]", 1, noisy(180.0, 0.005), "kernel")
    after = op("sm90_gemm [grid 64x1x1, block 128x1x1]", 1, noisy(240.0, 0.005), "kernel")
    old = op("cutlass_gemm", 1, noisy(20.0, 0.005), "kernel")
    diff = diff_profiles(cuda(after, other), cuda(other, old, before), base_label="b")
    assert [(r.name, r.role) for r in diff.rows[:2]] == [(after.name, "cause"), (before.name, "replaced")]
    line = why_lines(diff)[3]
    assert "sm90_gemm [grid 128x1x1, block 256x1x1] (kernel, removed, was 1 call, the same kernel launched" in line


# -- what leads: the rank, the replacement, rows that add up (issue: the why led with trivial operators) --------

SDPA = "aten::_scaled_dot_product_flash_attention_for_cpu"


def attention_switch(base_cut_us: float = 0.0) -> tuple[OpProfile, OpProfile]:
    """nanoGPT's attention switched from the fused operator to the manual path, as the issue measured it: many
    small count changes (copy_, view), the fused op removed, bmm/softmax/masked_fill added."""
    shared = [op("aten::addmm", 8, noisy(900.0, 0.01)), op("aten::native_layer_norm", 4, noisy(150.0, 0.01))]
    base = cpu(*shared, op(SDPA, 2, noisy(2524.0, 0.01)), op("aten::copy_", 9, noisy(300.0, 0.02)),
               op("aten::view", 36, noisy(40.0, 0.01)))  # fmt: skip
    head = cpu(*shared, op("aten::bmm", 4, noisy(2185.0, 0.01)), op("aten::_softmax", 2, noisy(912.0, 0.01)),
               op("aten::masked_fill_", 2, noisy(489.0, 0.01)), op("aten::copy_", 23, noisy(1022.0, 0.02)),
               op("aten::view", 38, noisy(42.0, 0.01)))  # fmt: skip
    return head, replace(base, omitted_below_ns=base_cut_us * 1e3)


def test_the_largest_change_leads_and_a_count_change_annotates_its_row() -> None:
    head, base = attention_switch()
    diff = diff_profiles(head, base, base_label="b", measured=measured(head, base))
    causes = [r for r in diff.rows if r.role == "cause"]
    assert [r.name for r in causes[:3]] == ["aten::bmm", "aten::_softmax", "aten::copy_"]
    assert [r.delta_ns for r in causes] == sorted((r.delta_ns for r in causes), reverse=True)
    copy = [r for r in diff.rows if r.name == "aten::copy_"]
    assert len(copy) == 1 and copy[0].reading == "calls" and copy[0].exact  # one row, the count its annotation
    assert copy[0].delta_ns == pytest.approx(head.ops[5].host_ns - base.ops[3].host_ns)  # the op's whole change
    view = next(r for r in diff.rows if r.name == "aten::view")
    assert diff.rows.index(view) > diff.rows.index(copy[0])  # 36 -> 38 calls is a fact, and a small one


def test_the_removed_operator_follows_the_row_that_replaced_it_and_the_headline_names_both() -> None:
    head, base = attention_switch()
    diff = diff_profiles(head, base, base_label="b", measured=measured(head, base))
    assert [(r.name, r.reading, r.role) for r in diff.rows[:2]] == [
        ("aten::bmm", "appeared", "cause"),
        (SDPA, "disappeared", "replaced"),
    ]
    words = headline(diff)
    assert (
        words is not None
        and words.startswith("+2.18")
        and f"ms aten::bmm (added, 4 calls), replacing {SDPA} (-2.5" in words
    )
    lines = why_lines(diff)
    assert "aten::bmm (added, 4 calls)" in lines[2]
    assert f"{SDPA} (removed, was 2 calls, replaced by the row above)" in lines[3]


def test_an_op_under_the_base_tables_cut_is_not_called_added_and_still_leads_by_its_size() -> None:
    head, base = attention_switch(base_cut_us=20.0)  # the base kept its longest rows: bmm may have been under 20 us
    diff = diff_profiles(head, base, base_label="b", measured=measured(head, base))
    bmm = diff.rows[0]
    assert (bmm.name, bmm.reading, bmm.role, bmm.base_calls) == ("aten::bmm", "grew", "cause", None)
    assert bmm.low_ns is not None and bmm.low_ns < 2185e3 - 20e3  # the interval allows it 20 us there
    assert (diff.rows[1].name, diff.rows[1].role) == (SDPA, "replaced")
    assert "from under the base's cut, now 4 calls" in why_lines(diff)[2]


def _adds_up(rows: list[WhyRow], change: MeasuredChange) -> None:
    assert rows[-1].role == "rest"
    assert sum(r.delta_ns for r in rows) == pytest.approx(change.delta_ns)
    shown = sum(r.delta_ns for r in rows[:-1])
    assert (rows[-1].low_ns, rows[-1].high_ns) == pytest.approx((change.low_ns - shown, change.high_ns - shown))


@pytest.mark.parametrize("top", [0, 1, 2, 3, 5, 50])
def test_the_rows_a_report_shows_and_its_rest_add_up_to_the_measured_change(top: int) -> None:
    head, base = attention_switch()
    change = measured(head, base)
    diff = diff_profiles(head, base, base_label="b", measured=change)
    shown = leading(diff.rows, top)
    assert len([r for r in shown if r.role == "cause"]) == min(top, len([r for r in diff.rows if r.role == "cause"]))
    _adds_up(shown, change)
    _adds_up(shown_rows(diff, top)[: len(shown)], change)
    for most in range(2, 12):
        table = table_rows(diff, most)
        assert len(table) <= most
        _adds_up([r for r in table if r.role in ("cause", "replaced", "rest")], change)


def test_a_small_removed_wrapper_stays_in_the_rest() -> None:
    base = cpu(op("aten::mm", 1, noisy(300.0, 0.01)), op("aten::sdpa_wrapper", 1, noisy(6.0, 0.01)),
               op("aten::fused", 1, noisy(100.0, 0.01)))  # fmt: skip
    head = cpu(op("aten::mm", 1, noisy(300.0, 0.01)), op("aten::bmm", 1, noisy(200.0, 0.01)),
               op("aten::eq", 1, noisy(14.0, 0.01)))  # fmt: skip
    diff = diff_profiles(head, base, base_label="b", measured=measured(head, base))
    lead = diff.rows[: [r.name for r in diff.rows].index(REST)]
    assert [(r.name, r.role) for r in lead] == [("aten::bmm", "cause"), ("aten::fused", "replaced"),
                                                ("aten::eq", "cause")]  # fmt: skip
    wrapper = next(r for r in diff.rows if r.name == "aten::sdpa_wrapper")
    assert wrapper.role == "offset"  # 6 us: under a tenth of the leading cause's 200 us


def test_a_count_change_and_a_slower_call_of_one_op_are_one_row() -> None:
    base = cpu(op("aten::mm", 1, noisy(300.0, 0.005)), op("aten::gelu", 1, noisy(100.0, 0.005)))
    head = cpu(op("aten::mm", 1, noisy(300.0, 0.005)), op("aten::gelu", 2, noisy(300.0, 0.005)))  # 150 us a call
    diff = diff_profiles(head, base, base_label="b", measured=measured(head, base))
    gelu = [r for r in diff.rows if r.name == "aten::gelu"]
    assert len(gelu) == 1 and (gelu[0].reading, gelu[0].role) == ("calls", "cause")
    assert gelu[0].delta_ns == pytest.approx(200_000.0, rel=0.02)
    assert gelu[0].low_ns is not None and gelu[0].low_ns < gelu[0].delta_ns < gelu[0].high_ns  # type: ignore[operator]


# -- the same on real profiles: a small GPT whose attention switches (tests/gpt_block.py) -----------------------


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "forward+backward"])
def test_a_real_gpt_with_its_attention_switched_leads_with_the_replacement(backward: bool) -> None:
    import torch
    from gpt_block import gpt_step

    from pytest_gpuperf.profiling.torch_profile import capture_calls

    cpu_device = torch.device("cpu")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        head, base = (capture_calls(gpt_step(flash, backward), (), {}, trace_path=None, label=side,
                                    device=cpu_device, calls=8, detailed=False).table
                      for flash, side in ((False, "head"), (True, "base")))  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    diff = diff_profiles(head, base, base_label="flash")
    rows = {r.name: r for r in diff.rows}
    # every operator of both real tables is kept, so each side's absence is a fact, not a cut
    assert head.omitted_below_ns == base.omitted_below_ns == 0.0
    assert not [r for r in diff.rows if r.reading in ("grew", "shrank")]
    assert (rows[SDPA].reading, rows[SDPA].base_calls, rows[SDPA].head_calls) == ("disappeared", 1, 0)
    assert (rows["aten::bmm"].reading, rows["aten::bmm"].head_calls) == ("appeared", 6 if backward else 2)
    if backward:
        assert rows[f"{SDPA}_backward"].reading == "disappeared"
    assert diff.profile_change is not None
    sign = 1.0 if diff.profile_change.delta_ns >= 0 else -1.0  # the way the profile moved (a busy host may turn it)
    causes = [r.delta_ns * sign for r in diff.rows if r.role == "cause"]
    assert causes == sorted(causes, reverse=True)
    halves = {"appeared", "disappeared"}
    for i, row in enumerate(diff.rows):
        if row.role == "replaced":  # the other half of the cause above it: one on each side only
            cause = diff.rows[i - 1]
            assert cause.role == "cause" and {cause.reading, row.reading} == halves
            assert row.other_half == cause.name
    for top in range(6):
        _adds_up(leading(diff.rows, top), diff.profile_change)
