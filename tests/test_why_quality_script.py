"""benchmarks/why_quality.py's CUDA cases: how a case is judged, its line, and the clean skip without CUDA."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch
from benchmark_scripts import benchmark_script

from pytest_gpuperf.model import MeasuredChange, OpProfile, OpStat
from pytest_gpuperf.profiling.diff import diff_profiles

GEMM_FAST = "sm90_gemm_align8 [grid 16x16x1, block 128x1x1]"
GEMM_SLOW = "sm80_gemm_align1 [grid 32x16x1, block 128x1x1]"
SIGMOID = "vectorized_elementwise_kernel<sigmoid>"


@pytest.fixture(scope="module")
def why() -> Iterator[ModuleType]:
    with benchmark_script("why_quality") as module:
        yield module


def kernel(name: str, per_call_us: list[float], calls: float = 1.0) -> OpStat:
    samples = tuple(us * 1e3 for us in per_call_us)
    return OpStat(name, "kernel", calls, 5e3, statistics.fmean(samples), host_samples_ns=(5e3,) * len(samples),
                  device_samples_ns=samples)  # fmt: skip


def cuda_table(*ops: OpStat, host_us: list[float]) -> OpProfile:
    per_call = [sum(op.device_samples_ns[i] for op in ops) for i in range(len(host_us))]
    host = tuple(us * 1e3 for us in host_us)
    return OpProfile("cuda", len(host_us), statistics.fmean(host), statistics.fmean(per_call), ops,
                     host_samples_ns=host, device_samples_ns=tuple(per_call))  # fmt: skip


def replaced_gemm() -> object:
    """A cuBLAS kernel replaced by a slower one (as a non-contiguous input does), the sigmoid unchanged."""
    host = [60.0, 61.0, 59.0, 60.5, 60.2]
    base = cuda_table(kernel(GEMM_FAST, [100, 101, 99, 100, 100.5]), kernel(SIGMOID, [30, 30.2, 29.9, 30.1, 30]),
                      host_us=host)  # fmt: skip
    head = cuda_table(kernel(GEMM_SLOW, [300, 302, 299, 301, 300]), kernel(SIGMOID, [30, 30.1, 30.2, 29.9, 30]),
                      host_us=host)  # fmt: skip
    return diff_profiles(head, base, base_label="base", measured=MeasuredChange(200e3, 190e3, 210e3))


def test_a_replaced_kernel_first_is_named_right(why: ModuleType) -> None:
    score = why.score_cuda(replaced_gemm(), {"sm80_gemm_align1"}, "device")
    assert score["ok"], score["problems"]
    assert score["first"][0] == GEMM_SLOW
    assert score["basis"] == "device"


def test_another_kernel_first_or_the_other_basis_fails(why: ModuleType) -> None:
    wrong_kernel = why.score_cuda(replaced_gemm(), {SIGMOID}, "device")
    assert not wrong_kernel["ok"]
    assert wrong_kernel["problems"] == [f"first row {GEMM_SLOW!r} is not the planted {SIGMOID}"]
    wrong_basis = why.score_cuda(replaced_gemm(), {"sm80_gemm_align1"}, "host")
    assert wrong_basis["problems"] == ["rows compare device time, not host time"]


def test_case_lines_say_ok_failed_or_skipped(why: ModuleType) -> None:
    good = {"ok": True, "change": 0.5, "first": [GEMM_SLOW, "appeared", 2e5], "problems": []}
    bad = {"ok": False, "change": 0.01, "problems": ["regression not confirmed (+1.0%)"]}
    assert why.case_line({"case": "matmul_layout", "trials": [good, good]}).split()[:2] == ["matmul_layout", "ok:"]
    line = why.case_line({"case": "extra_launch", "trials": [good, bad]})
    assert line.split()[:3] == ["extra_launch", "FAILED:", "1/2"]
    assert "regression not confirmed (+1.0%)" in line
    error = why.case_line({"case": "triton_slower", "error": "CompilationError: at 3:4"})
    assert error.split(None, 1) == ["triton_slower", "FAILED: CompilationError: at 3:4"]
    assert why.verdict({"case": "triton_slower", "error": "x"}) == "FAILED"
    assert "skipped: triton does not import" in why.case_line(
        {"case": "triton_slower", "skipped": "triton does not import"}
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skip without CUDA")
def test_cuda_cases_skip_cleanly_without_cuda(
    why: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "why_cuda.json"
    assert why.main(["--cases", "cuda", "--json", str(out)]) == 0
    figure = "why on CUDA: skipped, torch.cuda.is_available() is False"
    assert capsys.readouterr().out.splitlines() == [f"figure: {figure}"]
    assert json.loads(out.read_text()) == {"cpu": None, "cuda": {"figure": figure, "cases": []}}


def cpu_table(*ops: tuple[str, float, list[float]]) -> OpProfile:
    stats = [OpStat(name, "operator", calls, statistics.fmean(us) * 1e3, host_samples_ns=tuple(u * 1e3 for u in us))
             for name, calls, us in ops]  # fmt: skip
    per_call = tuple(sum(s.host_samples_ns[i] for s in stats) for i in range(len(ops[0][2])))
    return OpProfile("cpu", len(per_call), statistics.fmean(per_call), ops=tuple(stats), host_samples_ns=per_call)


def test_a_replacement_case_is_scored_by_what_the_short_report_and_the_headline_show(why: ModuleType) -> None:
    sdpa = "aten::_scaled_dot_product_flash_attention_for_cpu"
    shared = ("aten::addmm", 8, [900.0, 905.0, 895.0, 901.0])
    base = cpu_table(shared, (sdpa, 2, [2500.0, 2510.0, 2490.0, 2505.0]), ("aten::copy_", 9, [300.0, 301, 299, 300]))
    added = (("aten::bmm", 4, [2200.0, 2190, 2210, 2195]), ("aten::_softmax", 2, [900.0, 905, 895, 900]))
    head = cpu_table(shared, *added, ("aten::copy_", 23, [1000.0, 1010, 990, 1000]))
    diff = diff_profiles(head, base, base_label="base", measured=MeasuredChange(1_300e3, 1_200e3, 1_400e3))
    score = why.score_new(diff, why.MANUAL_ATTENTION)
    assert score["first_right"] and score["removed_shown"] and score["shown_adds_up"] and score["headline_right"]
    assert score["headline"].split(" (")[0].endswith("aten::bmm")
    plain = why.score_new(diff, "aten::copy_")  # a planted op that is not the first row
    assert not plain["first_right"] and not plain["headline_right"]


def test_the_replacement_cases_run_alone_or_after_the_planted_ones(why: ModuleType) -> None:
    args = why.argparse.Namespace(cases="replaced", shares="0.03,0.05")
    assert why.jobs(args) == [("attention", 0.0), ("attention+backward", 0.0)]
    every = why.jobs(why.argparse.Namespace(cases="cpu", shares="0.05"))
    assert every[0] == ("calls", 0.05) and every[-2:] == why.jobs(args) and ("unchanged", 0.0) in every
