"""The differential profile's ranking and name shortening (profiling/diff.py)."""

from __future__ import annotations

from pytest_gpuperf.model import OpProfile, OpStat
from pytest_gpuperf.profiling.diff import diff_profiles
from pytest_gpuperf.report.why import short_name


def _cpu(*ops: OpStat, host_ns: float = 1000.0) -> OpProfile:
    return OpProfile(device_type="cpu", profiled_calls=5, host_ns=host_ns, ops=ops)


def test_an_added_op_ranks_first_and_unchanged_ops_drop_out() -> None:
    base = _cpu(OpStat("aten::mm", "operator", 1, 600.0), OpStat("aten::add", "operator", 1, 100.0))
    head = _cpu(
        OpStat("aten::mm", "operator", 1, 601.0),
        OpStat("aten::add", "operator", 1, 100.0),
        OpStat("aten::gelu", "operator", 1, 250.0),
        host_ns=1250.0,
    )
    diff = diff_profiles(head, base, base_label="baseline abc1234")
    assert [c.name for c in diff.changes] == ["aten::gelu"]
    assert diff.changes[0].status == "appeared"
    assert diff.changes[0].delta_ns == 250.0
    assert diff.host_delta_ns == 250.0
    assert diff.device_delta_ns is None


def test_a_doubled_call_count_is_kept_even_when_cheap() -> None:
    base = _cpu(OpStat("aten::copy_", "operator", 1, 2.0), OpStat("aten::mm", "operator", 1, 900.0))
    head = _cpu(OpStat("aten::copy_", "operator", 2, 3.0), OpStat("aten::mm", "operator", 1, 900.0))
    diff = diff_profiles(head, base, base_label="ref main")
    assert [(c.name, c.calls_changed) for c in diff.changes] == [("aten::copy_", True)]


def test_a_disappeared_op_has_a_negative_change() -> None:
    base = _cpu(OpStat("aten::to", "operator", 1, 300.0), OpStat("aten::mm", "operator", 1, 300.0))
    head = _cpu(OpStat("aten::mm", "operator", 1, 900.0))
    diff = diff_profiles(head, base, base_label="baseline")
    assert [(c.name, c.status, c.delta_ns) for c in diff.changes] == [
        ("aten::mm", "changed", 600.0),
        ("aten::to", "disappeared", -300.0),
    ]


def test_cuda_ranks_by_device_time_and_splits_host_from_device() -> None:
    base = OpProfile("cuda", 5, host_ns=50_000.0, device_ns=200_000.0,
                     ops=(OpStat("ampere_sgemm_128x64_nn", "kernel", 1, 0.0, 200_000.0),))  # fmt: skip
    head = OpProfile("cuda", 5, host_ns=90_000.0, device_ns=200_500.0,
                     ops=(OpStat("ampere_sgemm_128x64_nn", "kernel", 1, 0.0, 200_500.0),))  # fmt: skip
    diff = diff_profiles(head, base, base_label="baseline")
    assert diff.host_delta_ns == 40_000.0
    assert diff.device_delta_ns == 500.0
    assert diff.changes == ()  # the kernel moved by 0.25%: jitter, not a cause


def test_without_a_base_the_heads_top_ops_are_listed_with_a_note() -> None:
    head = _cpu(OpStat("aten::add", "operator", 1, 10.0), OpStat("aten::mm", "operator", 1, 900.0))
    diff = diff_profiles(head, None, base_label="baseline abc1234")
    assert [c.name for c in diff.changes] == ["aten::mm", "aten::add"]
    assert "no stored profile" in diff.note
    assert diff.host_delta_ns is None


def test_short_names_keep_the_kernel_and_drop_the_noise() -> None:
    assert short_name("aten::mm") == "aten::mm"
    assert (
        short_name("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)")
        == "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"
    )
    long = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
    )
    assert short_name(long) == "at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<…>, Array<…> >"
    anonymous = "void at::native::(anonymous namespace)::softmax_warp_forward<float, float, 10>(float*, int)"
    assert short_name(anonymous) == "at::native::softmax_warp_forward<float, float, 10>"
    assert len(short_name("k" * 200)) == 80


def test_an_op_under_the_other_sides_cut_is_not_called_appeared_or_disappeared() -> None:
    base = OpProfile("cpu", 5, host_ns=1000.0, omitted_below_ns=3.0,
                     ops=(OpStat("aten::mm", "operator", 1, 900.0),))  # fmt: skip
    head = _cpu(
        OpStat("aten::mm", "operator", 1, 900.0),
        OpStat("aten::resolve_conj", "operator", 4, 2.0),  # fits under the base's cut: maybe no change at all
        OpStat("aten::gelu", "operator", 1, 200.0),  # above it, but it may have been there under 3 ns
    )
    diff = diff_profiles(head, base, base_label="baseline")
    (gelu,) = diff.changes
    assert (gelu.name, gelu.status, gelu.absent_below_ns, gelu.counts_known) == ("aten::gelu", "grew", 3.0, False)
    assert not gelu.calls_changed  # the base's count is unknown, not 0
    shrunk = diff_profiles(base, head, base_label="baseline")  # the same rule the other way round
    assert [(c.name, c.status) for c in shrunk.changes] == [("aten::gelu", "shrank")]


def test_only_a_complete_table_says_an_op_appeared() -> None:
    complete = _cpu(OpStat("aten::mm", "operator", 1, 900.0))
    head = _cpu(OpStat("aten::mm", "operator", 1, 900.0), OpStat("aten::gelu", "operator", 1, 200.0))
    (gelu,) = diff_profiles(head, complete, base_label="baseline").changes
    assert (gelu.status, gelu.absent_below_ns, gelu.calls_changed) == ("appeared", 0.0, True)


def test_what_got_slower_or_was_removed_comes_before_a_larger_speedup() -> None:
    base = _cpu(OpStat("aten::bmm", "operator", 1, 600.0), OpStat("aten::add", "operator", 1, 100.0))
    head = _cpu(
        OpStat("aten::bmm", "operator", 1, 300.0),
        OpStat("aten::add", "operator", 1, 100.0),
        OpStat("aten::copy_", "operator", 3, 200.0),
    )
    diff = diff_profiles(head, base, base_label="baseline")
    assert [(c.name, c.delta_ns) for c in diff.changes] == [("aten::copy_", 200.0), ("aten::bmm", -300.0)]
    replaced = diff_profiles(head, _cpu(*base.ops, OpStat("aten::to", "operator", 1, 250.0)), base_label="baseline")
    assert [(c.name, c.status) for c in replaced.changes] == [
        ("aten::to", "disappeared"),
        ("aten::copy_", "appeared"),
        ("aten::bmm", "changed"),
    ]
