"""Memory tracking, L2 flushing and CUDA graphs where there is no GPU: inactive, with clear errors."""

from __future__ import annotations

import json

import pytest
import torch

from pytest_gpuperf.errors import ConfigError, GpuperfError
from pytest_gpuperf.gpu import graphs
from pytest_gpuperf.gpu.graphs import GraphCaptureError, capture
from pytest_gpuperf.gpu.l2 import L2Flusher, l2_cache_bytes
from pytest_gpuperf.gpu.memory import MemoryTracker, is_oom_error

CPU = torch.device("cpu")


def test_memory_tracker_reports_nothing_on_cpu() -> None:
    tracker = MemoryTracker(CPU)
    tracker.reset()
    _ = torch.ones(1024)
    assert tracker.peak_allocated() is None
    assert tracker.peak_reserved() is None
    tracker.release()
    assert "cpu" in tracker.oom_report()
    tracker.exclude(1024)
    assert tracker.peak_allocated() is None


def test_excluding_a_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        MemoryTracker(CPU).exclude(-1)
    with pytest.raises(ValueError, match="negative"):
        MemoryTracker(CPU).exclude(0, reserved=-5)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB"), True),
        (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"), True),
        (RuntimeError("shape mismatch"), False),
        (ValueError("CUDA out of memory"), False),
        (MemoryError(), False),
    ],
)
def test_is_oom_error(exc: BaseException, expected: bool) -> None:
    assert is_oom_error(exc) is expected


def test_l2_flusher_is_inactive_on_cpu() -> None:
    flusher = L2Flusher(CPU)
    assert flusher.active is False
    assert "CPU" in flusher.reason
    assert flusher.nbytes == 0
    flusher.flush()  # a no-op, not an error
    assert l2_cache_bytes(CPU) is None


def test_graph_capture_on_cpu_says_it_needs_cuda() -> None:
    with pytest.raises(ConfigError, match=r"cuda_graph=True needs a CUDA device.*cpu"):
        capture(torch.add, (torch.ones(2), torch.ones(2)), {}, CPU)


def test_graph_capture_error_is_a_gpuperf_error() -> None:
    assert issubclass(GraphCaptureError, GpuperfError)


def test_cpu_tensor_arguments_are_refused_by_position() -> None:
    # The check only reads tensor.device, so the CUDA target needs no GPU here.
    cuda0 = torch.device("cuda", 0)
    args = (torch.empty(0, device="meta"), [torch.ones(1)])

    def step(*_: object) -> None: ...

    with pytest.raises(GraphCaptureError, match=r"args\[0\] is on meta") as info:
        graphs._check_tensors_on(cuda0, args, {}, step)
    assert info.value.where == "args[0]" and info.value.function is not None
    assert info.value.function.endswith("<locals>.step")
    with pytest.raises(GraphCaptureError, match=r"kwargs\['bias'\]\[1\] is on cpu") as info:
        graphs._check_tensors_on(cuda0, (), {"bias": (1, torch.ones(1))}, step)
    assert info.value.where == "kwargs['bias'][1]"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("CUDA error: operation not permitted when stream is capturing", ".item()"),
        (
            "CUDA error: operation failed due to a previous error during capture cudaErrorStreamCaptureInvalidated",
            "nonzero()",
        ),
        ("cudaErrorStreamCaptureUnjoined", "not joined back"),
        ("cudaErrorStreamCaptureImplicit", "legacy default stream"),
        ("some other failure", "fixed shapes and no host synchronization"),
    ],
)
def test_capture_failures_are_explained(message: str, expected: str) -> None:
    def my_kernel() -> None: ...

    text = graphs._explain(my_kernel, RuntimeError(message))
    assert "my_kernel" in text
    assert expected in text
    assert message in text


def test_an_inactive_flush_is_noted_once_for_all_measurements(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_cold="""
import pytest

@pytest.mark.gpuperf(l2_flush=True)
def test_cold(gpu_bench):
    gpu_bench.measure(sum, args=(range(1000),), name="a")
    gpu_bench.measure(sum, args=(range(2000),), name="b")
"""
    )
    result = pytester.runpytest_subprocess(
        "--gpuperf", "--gpuperf-device=cpu", "--gpuperf-max-time=0.05", "--gpuperf-min-time=0.01",
        "-p", "no:cacheprovider",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*gpuperf notes*",
            "2 measurements (test_cold.py::test_cold::a, +1 more): l2_flush requested but inactive*",
        ]
    )
    assert result.stdout.str().count("l2_flush requested but inactive") == 1


def test_energy_asked_on_the_cpu_is_a_note_not_a_metric(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_e="""
import pytest

@pytest.mark.gpuperf(energy=True)
def test_marked(gpu_bench):
    gpu_bench(sum, range(100))

def test_called(gpu_bench):
    m = gpu_bench.measure(sum, (range(100),), energy=True)
    assert m.metric("energy") is None
"""
    )
    results = pytester.path / "r.json"
    run = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-device=cpu", "--gpuperf-max-time=0.1",
                                        "--gpuperf-min-time=0.02", f"--gpuperf-json={results}", "-p",
                                        "no:cacheprovider")  # fmt: skip
    run.assert_outcomes(passed=2)
    said = "energy requested but not measured: NVML reads a CUDA device's energy, not cpu's"
    for r in json.loads(results.read_text())["results"]:
        assert said in [n["text"] for n in r["measurement"]["notes"]]
        assert r["measurement"]["device_state"] is None
