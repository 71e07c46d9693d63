"""torch.profiler captures on the CPU: a Chrome trace on disk and a sane operator summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from pytest_gpuperf.model import ProfileSummary
from pytest_gpuperf.profiling.torch_profile import capture_calls, safe_label, top_operators
from pytest_gpuperf.report.terminal import format_top_ops

CPU = torch.device("cpu")


def matmul_relu(a: torch.Tensor, b: torch.Tensor, *, scale: float) -> torch.Tensor:
    return torch.relu(a @ b) * scale


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> ProfileSummary:
    a = torch.randn(96, 96)
    out = tmp_path_factory.mktemp("profiles")
    label = "tests/t.py::test_mm[96]::default"
    return capture_calls(matmul_relu, (a, a), {"scale": 0.5}, trace_path=out / f"{safe_label(label)}.json",
                         label=label, device=CPU).summary()  # fmt: skip


def test_trace_is_written_and_is_chrome_json(summary: ProfileSummary) -> None:
    path = Path(summary.trace_path)
    assert path.is_file()
    assert path.suffix == ".json"
    assert path.name.startswith("tests_t.py_test_mm_96_default-")
    doc = json.loads(path.read_text())
    assert isinstance(doc["traceEvents"], list)
    names = {e.get("name") for e in doc["traceEvents"]}
    assert "aten::mm" in names
    assert any(str(n).startswith("gpuperf:tests/t.py::test_mm[96]::default#") for n in names)


def test_top_ops_are_ranked_with_shares_that_add_up(summary: ProfileSummary) -> None:
    assert summary.activities == ("cpu",)
    assert summary.top_ops
    shares = [share for _, _, share in summary.top_ops]
    times = [t for _, t, _ in summary.top_ops]
    assert all(0 < s <= 1 for s in shares)
    assert sum(shares) <= 1 + 1e-9
    assert times == sorted(times, reverse=True)
    names = [name for name, _, _ in summary.top_ops]
    assert "aten::mm" in names
    assert not any(n.startswith("gpuperf:") for n in names)  # our own ranges are not operators


def test_format_top_ops(summary: ProfileSummary) -> None:
    lines = format_top_ops(summary, n=2)
    assert "self CPU time" in lines[0]
    assert len(lines) == 1 + min(2, len(summary.top_ops))
    assert lines[1].strip().endswith(summary.top_ops[0][0])
    assert "%" in lines[1]


def test_format_without_ops() -> None:
    lines = format_top_ops(ProfileSummary(trace_path="x.json", activities=("cpu", "cuda")))
    assert lines == ["no operator recorded device time"]


def test_calls_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="calls must be at least 1"):
        capture_calls(torch.neg, (torch.ones(1),), {}, trace_path=None, label="x", device=CPU, calls=0)


def test_safe_labels_are_flat_file_names_and_distinct() -> None:
    a, b = safe_label("t.py::test[a/b]"), safe_label("t.py::test[a:b]")
    assert a != b
    assert "/" not in a and ":" not in a
    assert safe_label("///").startswith("profile-")
    assert len(safe_label("x" * 500)) <= 120 + 9


def event(key: str, *, cuda: bool = False, self_device: float = 0.0, self_cpu: float = 0.0) -> SimpleNamespace:
    return SimpleNamespace(
        key=key, device_type="CUDA" if cuda else "CPU", self_device_time_total=self_device, self_cpu_time_total=self_cpu
    )


def test_device_ranking_uses_operators_and_kernel_total() -> None:
    events = [
        event("aten::mm", self_device=80.0, self_cpu=10.0),
        event("aten::add", self_device=10.0, self_cpu=5.0),
        event("cudaLaunchKernel", self_cpu=30.0),
        event("gpuperf:label#0", self_cpu=50.0),
        event("sm90_xmma_gemm_bf16", cuda=True, self_device=80.0),
        event("vectorized_elementwise_kernel", cuda=True, self_device=10.0),
        event("triton_fused_kernel_outside_ops", cuda=True, self_device=10.0),
    ]
    ops = top_operators(events, on_cuda=True, is_cuda_event=lambda e: e.device_type == "CUDA")
    assert [name for name, _, _ in ops] == ["aten::mm", "aten::add"]
    assert ops[0][1] == pytest.approx(80_000.0)  # microseconds -> nanoseconds
    assert ops[0][2] == pytest.approx(0.8)
    assert ops[1][2] == pytest.approx(0.1)


def test_cpu_ranking_and_empty_profiles() -> None:
    events = [event("aten::mm", self_cpu=30.0), event("aten::relu", self_cpu=10.0), event("[memory]")]
    ops = top_operators(events, on_cuda=False, is_cuda_event=lambda e: False)
    assert [(n, round(s, 3)) for n, _, s in ops] == [("aten::mm", 0.75), ("aten::relu", 0.25)]
    assert top_operators([], on_cuda=True, is_cuda_event=lambda e: True) == ()


def test_the_warm_up_call_is_left_out_of_the_tables() -> None:
    calls = 0

    def mm_then_an_extra_op_on_the_profiled_warm_up(a: torch.Tensor) -> torch.Tensor:
        nonlocal calls
        calls += 1
        out = a @ a
        return torch.tanh(out) if calls == 2 else out  # call 1: unprofiled; call 2: the warm-up, #0

    capture = capture_calls(mm_then_an_extra_op_on_the_profiled_warm_up, (torch.randn(32, 32),), {}, trace_path=None,
                            label="t", device=CPU, calls=3)  # fmt: skip
    assert calls == 5
    table = {op.name: op.calls for op in capture.table.ops}
    assert table["aten::mm"] == 1.0  # three calls profiled, one mm each
    assert "aten::tanh" not in table
    assert all(name != "aten::tanh" for name, _, _ in capture.top_ops)


def test_a_profile_does_not_import_torch_inductor() -> None:
    # torch.profiler.profile's first start imports torch._inductor (a second of CPU) to read one setting
    script = (
        "import sys, torch\n"
        "from pytest_gpuperf.profiling.torch_profile import capture_calls\n"
        "a = torch.randn(16, 16)\n"
        "capture = capture_calls(lambda: a @ a, (), {}, trace_path=None, label='t', device=torch.device('cpu'))\n"
        "assert capture.table.ops, 'no operators profiled'\n"
        "print('torch._inductor' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"
