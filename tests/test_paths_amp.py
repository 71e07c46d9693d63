from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from pytest_gpuperf.paths._torch import relative_error, saved_activation_bytes
from pytest_gpuperf.paths.amp import AmpNumericsError, compare_autocast, cpu_fp16_skip_reason
from pytest_gpuperf.paths.standalone import StandaloneBench


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))


class WrongUnderAutocast(torch.nn.Module):
    """Fast-but-wrong: drops the second layer whenever autocast is on."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled(x.device.type):
            return self.inner[0](x)[:, :8]
        return self.inner(x)


@pytest.fixture
def bench() -> StandaloneBench:
    return StandaloneBench(calls=2, warmup=0)


def inputs() -> tuple[torch.Tensor]:
    torch.manual_seed(1)
    return (torch.randn(16, 32),)


def test_inference_records_fp32_and_bf16_with_gateable_metrics(bench: StandaloneBench) -> None:
    report = compare_autocast(bench, mlp(), inputs(), dtypes=("bf16",))
    assert set(bench.measurements) == {"amp.fp32", "amp.bf16"}
    bf16 = bench.measurements["amp.bf16"]
    speedup = bf16.metric("speedup")
    numerics = bf16.metric("numerics_error")
    assert speedup is not None and speedup.better == "higher" and speedup.value > 0
    assert numerics is not None and numerics.maximum == 0.05 and numerics.tolerance is None
    assert 0 < report.results["bf16"].numerics_error < 0.05
    assert bench.measurements["amp.fp32"].metrics == ()  # the reference carries no ratios


def test_min_speedup_becomes_a_hard_bound(bench: StandaloneBench) -> None:
    compare_autocast(bench, mlp(), inputs(), dtypes=("bf16",), min_speedup=1.3, name="amp_gate")
    speedup = bench.measurements["amp_gate.bf16"].metric("speedup")
    assert speedup is not None and speedup.minimum == 1.3


@pytest.mark.skipif(cpu_fp16_skip_reason() is None, reason="this CPU has native fp16")
def test_fp16_on_cpu_without_native_support_is_skipped_with_a_note(bench: StandaloneBench) -> None:
    report = compare_autocast(bench, mlp(), inputs())
    assert "fp16" in report.skipped and "native fp16" in report.skipped["fp16"]
    assert "amp.fp16" not in bench.measurements
    assert "bf16" in report.results


def test_training_step_with_grad_scaler_and_activation_saving(bench: StandaloneBench) -> None:
    target = torch.randint(0, 8, (16,))
    report = compare_autocast(
        bench,
        mlp(),
        inputs(),
        loss_fn=lambda out: F.cross_entropy(out, target),
        optimizer=lambda params: torch.optim.SGD(params, lr=0.1),
        allow_emulated=True,  # fp16 on CPU: slow but right, so the GradScaler path runs here
    )
    assert set(report.results) == {"bf16", "fp16"}
    for dtype, result in report.results.items():
        assert result.numerics_error <= result.tolerance
        # autocast saves half-width activations for backward: fewer bytes than fp32
        assert result.activation_saving is not None and result.activation_saving > 0, dtype
        assert bench.measurements[f"amp.{dtype}"].metric("activation_saving") is not None


def test_wrong_autocast_path_fails_before_timing(bench: StandaloneBench) -> None:
    with pytest.raises(AmpNumericsError, match=r"amp\.bf16: autocast outputs differ from fp32"):
        compare_autocast(bench, WrongUnderAutocast(), inputs(), dtypes=("bf16",))
    assert bench.measurements == {}


def test_wrong_training_path_names_loss_and_gradients(bench: StandaloneBench) -> None:
    target = torch.randint(0, 8, (16,))
    with pytest.raises(AmpNumericsError, match=r"train\.bf16: autocast loss/gradients differ"):
        compare_autocast(
            bench,
            WrongUnderAutocast(),
            inputs(),
            loss_fn=lambda o: F.cross_entropy(o, target),
            dtypes=("bf16",),
            name="train",
        )


def test_tight_tolerance_fails_a_correct_bf16_path(bench: StandaloneBench) -> None:
    with pytest.raises(AmpNumericsError, match="tolerance 1e-07") as info:
        compare_autocast(bench, mlp(), inputs(), dtypes=("bf16",), tolerance=1e-7)
    error = info.value
    assert error.measurement == "amp.bf16" and error.tolerance == 1e-7
    assert error.relative_error > error.tolerance


def test_unknown_dtype_is_named(bench: StandaloneBench) -> None:
    with pytest.raises(ValueError, match="'int8'"):
        compare_autocast(bench, mlp(), inputs(), dtypes=("int8",))


def test_relative_error() -> None:
    a = torch.tensor([3.0, 4.0])
    assert relative_error(a, a) == 0.0
    assert relative_error(torch.tensor([3.0, 5.0]), a) == pytest.approx(1 / 5)
    assert relative_error((a, {"x": a}), (a, {"x": a})) == 0.0
    assert relative_error(torch.tensor([float("nan"), 0.0]), a) == float("inf")
    with pytest.raises(ValueError, match="structure"):
        relative_error((a, a), a)


def test_saved_activation_bytes_sees_checkpointing() -> None:
    layers = torch.nn.ModuleList(torch.nn.Linear(64, 64) for _ in range(4))
    x = torch.randn(32, 64, requires_grad=True)

    def forward(ckpt: bool) -> torch.Tensor:
        h = x
        for layer in layers:
            h = checkpoint(layer, h, use_reentrant=False) if ckpt else torch.relu(layer(h))
        return h.sum()

    _, plain = saved_activation_bytes(lambda: forward(False), exclude=list(layers.parameters()))
    _, ckpt = saved_activation_bytes(lambda: forward(True), exclude=list(layers.parameters()))
    assert plain > ckpt > 0
    _, with_params = saved_activation_bytes(lambda: forward(False))
    assert with_params > plain  # the weights are saved too, and counted unless excluded


def test_fp16_check_backs_off_an_overflowing_loss_scale(bench: StandaloneBench) -> None:
    # gradients of 1000 * scale overflow fp16 at the GradScaler's initial 65536; the
    # check halves the scale as the scaler's skipped steps would, instead of failing on inf
    report = compare_autocast(
        bench,
        torch.nn.Linear(32, 8),
        inputs(),
        loss_fn=lambda out: out.float().sum() * 1000,
        optimizer=lambda params: torch.optim.SGD(params, lr=1e-6),
        dtypes=("fp16",),
        allow_emulated=True,
    )
    assert report.results["fp16"].numerics_error <= report.results["fp16"].tolerance
