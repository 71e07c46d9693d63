from __future__ import annotations

import pytest
import torch

from pytest_gpuperf.model import Measurement
from pytest_gpuperf.paths.kernels import achieved_rates, kernel_efficiency, measure_kernel
from pytest_gpuperf.paths.peaks import DevicePeaks, calibrate, device_peaks, dtype_key, lookup
from pytest_gpuperf.paths.standalone import StandaloneBench


@torch.library.custom_op("gpuperf_tests::scale_add", mutates_args=())
def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha + y


@pytest.mark.parametrize(
    ("device_name", "expected"),
    [
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla T4", "T4"),
    ],
)
def test_table_matches_torch_device_names(device_name: str, expected: str) -> None:
    peaks = lookup(device_name)
    assert peaks is not None and peaks.name == expected
    assert peaks.source.startswith("datasheet: NVIDIA")
    assert peaks.memory_gbps > 0 and peaks.tflops["fp16"] >= peaks.tflops["fp32"]


@pytest.mark.parametrize("device_name", ["NVIDIA GH200 480GB", "NVIDIA B200", "cpu"])
def test_unlisted_devices_are_not_guessed(device_name: str) -> None:
    assert lookup(device_name) is None


def test_no_bf16_peak_on_volta() -> None:
    peaks = lookup("Tesla V100-SXM2-32GB")
    assert peaks is not None
    with pytest.raises(KeyError, match="no bf16 peak"):
        peaks.peak_tflops(torch.bfloat16)


def test_cpu_peaks_come_from_a_calibration() -> None:
    peaks = calibrate(torch.device("cpu"), matmul_n=128, copy_bytes=1 << 20, reps=1)
    assert peaks.source.startswith("calibrated: 128x128 fp32 matmul")
    assert peaks.tflops["fp32"] > 0 and peaks.memory_gbps > 0
    assert device_peaks(torch.device("cpu")).source.startswith("calibrated")


def measurement_of(ms: float) -> Measurement:
    return Measurement(
        test_id="t", name="kernel.k", samples_ns=(ms * 1e6,) * 3, calls_per_sample=1, device="cpu", timer="perf_counter"
    )


def test_roofline_fraction_uses_the_binding_resource() -> None:
    bench = StandaloneBench()
    m = bench.record(measurement_of(1.0))  # 1 ms per call
    peaks = DevicePeaks("fake", {"fp32": 2.0, "bf16": 8.0}, memory_gbps=4.0, source="test")
    report = kernel_efficiency(bench, m, flops=1e9, bytes=1e6, peaks=peaks, min_fraction=0.3)
    assert report.tflops == pytest.approx(1.0) and report.gbps == pytest.approx(1.0)
    assert report.flops_fraction == pytest.approx(0.5) and report.bandwidth_fraction == pytest.approx(0.25)
    assert (report.bound, report.fraction_of_peak) == ("compute", pytest.approx(0.5))
    fraction = bench.measurements["kernel.k"].metric("fraction_of_peak")
    assert fraction is not None and fraction.minimum == 0.3 and "compute-bound" in fraction.description

    memory = kernel_efficiency(bench, m, bytes=3e6, peaks=peaks)
    assert (memory.bound, memory.fraction_of_peak, memory.tflops) == ("memory", pytest.approx(0.75), None)
    low = kernel_efficiency(bench, m, flops=1e9, dtype=torch.bfloat16, peaks=peaks)
    assert low.fraction_of_peak == pytest.approx(1 / 8)


def test_rates_need_work_and_time() -> None:
    bench = StandaloneBench()
    m = bench.record(measurement_of(1.0))
    with pytest.raises(ValueError, match=r"kernel\.k: give flops and/or bytes"):
        kernel_efficiency(bench, m)
    with pytest.raises(ValueError, match="positive"):
        achieved_rates(0.0, 1.0, None)
    assert dtype_key(torch.float16) == "fp16"


def test_custom_op_measured_against_calibrated_cpu_peak() -> None:
    bench = StandaloneBench(calls=3)
    x, y = torch.randn(1 << 16), torch.randn(1 << 16)
    peaks = calibrate(torch.device("cpu"), matmul_n=128, copy_bytes=1 << 20, reps=1)
    report = measure_kernel(
        bench,
        torch.ops.gpuperf_tests.scale_add,
        (x, y, 2.0),
        name="kernel.custom_op",
        flops=2 * x.numel(),
        bytes=3 * x.numel() * 4,
        peaks=peaks,
    )
    assert torch.equal(scale_add(x, y, 2.0), x * 2.0 + y)
    m = bench.measurements["kernel.custom_op"]
    assert {x.name for x in m.metrics} == {"tflops", "gbps", "fraction_of_peak"}
    assert m.throughput.flops == 2 * x.numel()
    assert report.fraction_of_peak > 0


def test_dtype_given_by_name_is_calibrated_in_that_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpuperf.paths import peaks as peaks_module

    asked: list[torch.dtype] = []

    def fake_calibrate(device: torch.device, dtype: torch.dtype) -> DevicePeaks:
        asked.append(dtype)
        return DevicePeaks("cpu", {dtype_key(dtype): 1.0}, 1.0, "calibrated: fake")

    monkeypatch.setattr(peaks_module, "calibrate", fake_calibrate)
    assert device_peaks(torch.device("cpu"), "bf16").tflops == {"bf16": 1.0}
    assert asked == [torch.bfloat16]
    with pytest.raises(KeyError, match="no tf32 peak for cpu"):
        device_peaks(torch.device("cpu"), "tf32")
