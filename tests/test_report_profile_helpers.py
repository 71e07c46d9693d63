"""Differential profiles for the report tests: real ``diff_profiles`` on profiles shaped like torch.profiler's.

The op tables are what a profiled call of each planted regression looks like
(CPU operators of a small MLP's forward pass; cuBLAS, CUTLASS and PyTorch
elementwise kernels with their demangled names on CUDA). The report tests
import the builders; the tests here check that the diffs rank as the reports
expect, so a change to the ranking is noticed here first.
"""

from __future__ import annotations

import dataclasses

from test_report_helpers import BASE, ENV, HEAD, baseline, measurement, time_cmp

from pytest_gpuperf.model import (
    MeasuredChange,
    MeasurementResult,
    OpProfile,
    OpStat,
    ProfileDiff,
    SessionResults,
    Verdict,
)
from pytest_gpuperf.profiling.diff import diff_profiles

CUBLAS_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"  # noqa: E501
CUTLASS_GEMM = (
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)"
)
GELU_KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::"
    "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() "
    "const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)"
)
ADD_KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)"
)
BASE_LABEL = "baseline 1f3c9e2"


JITTER = (0.98, 0.99, 1.0, 1.01, 1.02)  # five profiled calls around each time, their mean the time itself


def calls_of(ns: float) -> tuple[float, ...]:
    return tuple(ns * j for j in JITTER)


def op(name: str, calls: float, host_us: float, device_us: float = 0.0, kind: str = "operator") -> OpStat:
    return OpStat(name, kind, calls, host_us * 1e3, device_us * 1e3,  # type: ignore[arg-type]
                  calls_of(host_us * 1e3), calls_of(device_us * 1e3) if device_us else ())  # fmt: skip


def kernel(name: str, calls: float, device_us: float) -> OpStat:
    return op(name, calls, 0.0, device_us, kind="kernel")


def _cpu(*ops: OpStat) -> OpProfile:
    host = sum(s.host_ns for s in ops) * 1.05
    return OpProfile("cpu", profiled_calls=5, host_ns=host, ops=ops, torch="2.5.1", host_samples_ns=calls_of(host))


MLP_BASE = (
    op("aten::addmm", 2, 180.0),
    op("aten::relu", 1, 12.0),
    op("aten::copy_", 1, 6.0),
    op("aten::linear", 2, 3.0),
    op("aten::t", 2, 1.5),
)


def cpu_extra_op_diff() -> ProfileDiff:
    """An extra GELU in an MLP's forward pass (and the copy feeding it): the GELU appeared."""
    head = (*MLP_BASE[:2], op("aten::copy_", 2, 12.5), *MLP_BASE[3:], op("aten::gelu", 1, 412.0))
    return diff_profiles(
        _cpu(*head), _cpu(*MLP_BASE), base_label=BASE_LABEL,
        head_trace="gpuperf-profiles/test_mlp.head.json", base_trace="gpuperf-profiles/test_mlp.base.json",
    )  # fmt: skip


def cpu_under_the_cut_diff() -> ProfileDiff:
    """The extra GELU against a base whose table left out ops under 2 us: it grew from under the cut."""
    cut = dataclasses.replace(_cpu(*MLP_BASE), omitted_below_ns=2e3)
    head = (*MLP_BASE, op("aten::gelu", 1, 412.0))
    return diff_profiles(_cpu(*head), cut, base_label=BASE_LABEL)


def _cuda(host_us: float, *ops: OpStat) -> OpProfile:
    device = sum(s.device_ns for s in ops if s.kind == "kernel")
    return OpProfile("cuda", profiled_calls=5, host_ns=host_us * 1e3, device_ns=device, ops=ops, torch="2.5.1+cu124",
                     host_samples_ns=calls_of(host_us * 1e3), device_samples_ns=calls_of(device))  # fmt: skip


def cuda_kernel_swap_diff() -> ProfileDiff:
    """cuBLAS's sm90 GEMM replaced by an older CUTLASS one, and a slower add: device time moved, host time did not."""
    base = _cuda(
        48.0,
        op("aten::mm", 1, 9.0, 181.0), op("aten::add", 1, 4.0, 6.0), op("aten::gelu", 1, 4.0, 11.0),
        kernel(CUBLAS_GEMM, 1, 181.0), kernel(ADD_KERNEL, 1, 6.0), kernel(GELU_KERNEL, 1, 11.0),
    )  # fmt: skip
    head = _cuda(
        49.0,
        op("aten::mm", 1, 9.5, 262.0), op("aten::add", 1, 4.0, 9.0), op("aten::gelu", 1, 4.0, 11.0),
        kernel(CUTLASS_GEMM, 1, 262.0), kernel(ADD_KERNEL, 1, 9.0), kernel(GELU_KERNEL, 1, 11.0),
    )  # fmt: skip
    return diff_profiles(head, base, base_label="ref main (1f3c9e2)", head_trace="gpuperf-profiles/test_mm.head.json")


def cuda_host_side_diff() -> ProfileDiff:
    """The same kernels, launched after 41 us more Python: named host time."""
    kernels = (kernel(CUBLAS_GEMM, 1, 181.0), kernel(ADD_KERNEL, 1, 6.0))
    base = _cuda(50.0, op("aten::mm", 1, 9.0, 181.0), *kernels)
    head = _cuda(91.0, op("aten::mm", 1, 9.0, 181.0), kernels[0], kernel(ADD_KERNEL, 1, 6.02))
    return diff_profiles(head, base, base_label=BASE_LABEL)


def no_base_diff() -> ProfileDiff:
    """A baseline entry written before profiles were stored: the head's top ops and a note."""
    return diff_profiles(_cpu(*MLP_BASE), None, base_label=BASE_LABEL)


def regressed(diff: ProfileDiff | None, test_id: str = "tests/perf/test_mlp.py::test_forward") -> MeasurementResult:
    """A confirmed time regression (+25%) carrying ``diff``."""
    m = measurement(test_id, "default", 250_000.0)
    base = baseline(m, 200_000.0)
    timing = time_cmp(m, base, Verdict.REGRESSION, ci_low=1.22, ci_high=1.28, threshold=0.05,
                      evidence="CI of ratio [1.22, 1.28] excludes 1")  # fmt: skip
    return MeasurementResult(measurement=m, baseline=base, comparisons=(timing,), profile_diff=diff)


def session_of(*results: MeasurementResult) -> SessionResults:
    return SessionResults(
        results=results, environment=ENV, provenance=HEAD, mode="baseline",
        started_at="2026-01-02T03:05:00+00:00", base_provenance=BASE,
    )  # fmt: skip


def with_profile(result: MeasurementResult, diff: ProfileDiff) -> MeasurementResult:
    return dataclasses.replace(result, profile_diff=diff)


def test_the_planted_culprit_ranks_first() -> None:
    cpu = cpu_extra_op_diff()
    assert [(c.name, c.status) for c in cpu.changes[:2]] == [("aten::gelu", "appeared"), ("aten::copy_", "changed")]
    swap = cuda_kernel_swap_diff()
    assert [(c.name, c.status) for c in swap.changes[:3]] == [
        (CUTLASS_GEMM, "appeared"),
        (CUBLAS_GEMM, "disappeared"),
        ("aten::mm", "changed"),
    ]


def test_the_host_side_diff_has_unchanged_kernels_and_more_host_time() -> None:
    diff = cuda_host_side_diff()
    assert diff.changes == ()
    assert diff.host_delta_ns == 41_000.0
    assert diff.device_delta_ns is not None and 0 < diff.device_delta_ns < 100


def disagreeing_diff() -> ProfileDiff:
    """The profile says the extra GELU costs 412 us a call; the measurement says 50 us: apart beyond both intervals."""
    head = (*MLP_BASE, op("aten::gelu", 1, 412.0))
    return diff_profiles(_cpu(*head), _cpu(*MLP_BASE), base_label=BASE_LABEL,
                         measured=MeasuredChange(50_000.0, 44_000.0, 56_000.0))  # fmt: skip


def test_a_disagreeing_profile_has_no_rows() -> None:
    diff = disagreeing_diff()
    assert diff.finding == "disagrees" and diff.rows == ()
    assert diff.profile_change is not None and diff.profile_change.low_ns > 56_000.0
