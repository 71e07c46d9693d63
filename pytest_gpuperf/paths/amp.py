"""Automatic mixed precision: fp32 against autocast bf16/fp16 in one test.

A reduced-precision result must stay within a tolerance of fp32 before any timing.
Each autocast measurement gets ``speedup``, ``numerics_error``, and where known
``memory_saving`` (CUDA peaks) and ``activation_saving`` (training steps).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from pytest_gpuperf.errors import AmpNumericsError
from pytest_gpuperf.model import Measurement
from pytest_gpuperf.paths import Bench
from pytest_gpuperf.paths._torch import record_speedup, relative_error, saved_activation_bytes, tensor_leaves

DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# Norm-wise relative error against fp32 still counted as right: an order of magnitude above the
# unit roundoff (bf16 2**-9, fp16 2**-12); a wrong path (a dropped scale) is off by far more.
DEFAULT_TOLERANCE: dict[str, float] = {"bf16": 0.05, "fp16": 0.01}
_MAX_BACKOFFS = 24  # halvings of the fp16 loss scale before the check gives up (65536 -> ~0.004)

LossFn = Callable[[Any], torch.Tensor]
OptimizerFactory = Callable[[Any], torch.optim.Optimizer]


@dataclass(frozen=True)
class PrecisionResult:
    """One autocast dtype against fp32."""

    dtype: str
    measurement: Measurement
    numerics_error: float
    tolerance: float
    speedup: float
    memory_saving: float | None = None
    activation_saving: float | None = None


@dataclass(frozen=True)
class AmpReport:
    """What :func:`compare_autocast` measured: fp32, each autocast dtype, the dtypes skipped."""

    fp32: Measurement
    results: dict[str, PrecisionResult] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # dtype -> why


def cpu_fp16_skip_reason() -> str | None:
    """Why fp16 autocast is not worth measuring on this CPU (emulated matmuls), or None where it is."""
    capability = str(torch.backends.cpu.get_cpu_capability())
    if "FP16" in capability.upper() or "AMX" in capability.upper():
        return None
    return f"fp16 autocast on CPU needs native fp16 (AVX512-FP16/AMX); this CPU has {capability}"


def _native_cuda_bf16() -> bool:
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # torch < 2.4 has no including_emulation and counts native support only
        return bool(torch.cuda.is_bf16_supported())


def _skip_reason(dtype: str, device: torch.device, allow_emulated: bool) -> str | None:
    if device.type == "cpu" and dtype == "fp16" and not allow_emulated:
        return cpu_fp16_skip_reason()
    # Pre-Ampere GPUs (T4, V100) run bf16 only emulated: right, but no speedup to gate.
    if device.type == "cuda" and dtype == "bf16" and not allow_emulated and not _native_cuda_bf16():
        return f"{torch.cuda.get_device_name(device)} has no native bf16"
    return None


class _Step:
    """One precision's step: its own model copy, optimizer and scaler."""

    def __init__(
        self,
        model: torch.nn.Module,
        dtype: str,
        device: torch.device,
        loss_fn: LossFn | None,
        optimizer: OptimizerFactory | None,
    ) -> None:
        self.model = model
        self.dtype = dtype
        self.device = device
        self.loss_fn = loss_fn
        self.optimizer = optimizer(model.parameters()) if optimizer is not None else None
        # The scaler keeps fp16 gradients from underflowing; it needs an optimizer to step.
        scaled = dtype == "fp16" and loss_fn is not None and self.optimizer is not None
        self.scaler = torch.amp.GradScaler(device.type) if scaled else None

    def autocast(self) -> torch.autocast:
        return torch.autocast(self.device.type, dtype=DTYPES[self.dtype], enabled=self.dtype != "fp32")

    def forward(self, inputs: Sequence[Any]) -> Any:
        with self.autocast():
            return self.model(*inputs)

    def __call__(self, inputs: Sequence[Any]) -> Any:
        if self.loss_fn is None:
            with torch.inference_mode():
                return self.forward(inputs)
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.loss_fn(self.model(*inputs))
        if self.scaler is not None and self.optimizer is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            if self.optimizer is not None:
                self.optimizer.step()
        return loss.detach()

    def reference(self, inputs: Sequence[Any]) -> list[torch.Tensor]:
        """Outputs (inference) or loss and unscaled gradients (training), before any update."""
        if self.loss_fn is None:
            with torch.inference_mode():
                return [t.float() for t in tensor_leaves(self.forward(inputs))]
        # Scale fp16 gradients as the GradScaler would, halving the scale on overflow as it does.
        scale = float(self.scaler.get_scale()) if self.scaler is not None else 1.0
        for _ in range(_MAX_BACKOFFS):
            self.model.zero_grad(set_to_none=True)
            with self.autocast():
                loss = self.loss_fn(self.model(*inputs))
            (loss * scale if scale != 1.0 else loss).backward()
            # A parameter the path never touched has no gradient: zeros, so it still counts.
            grads = [
                p.grad.float() / scale if p.grad is not None else torch.zeros_like(p, dtype=torch.float32)
                for p in self.model.parameters()
            ]
            if self.scaler is None or all(bool(torch.isfinite(g).all()) for g in grads):
                break
            scale /= 2
        self.model.zero_grad(set_to_none=True)
        return [loss.detach().float().reshape(1), *grads]


def _loss(step: _Step, loss_fn: LossFn, inputs: Sequence[Any]) -> torch.Tensor:
    return loss_fn(step.forward(inputs))


def _check(
    name: str, dtype: str, got: list[torch.Tensor], ref: list[torch.Tensor], tol: float, training: bool
) -> float:
    __tracebackhide__ = True
    if training:  # the loss and the gradients are compared apart: a tiny loss must not hide bad grads
        error = max(relative_error(got[0], ref[0]), relative_error(got[1:], ref[1:]))
    else:
        error = relative_error(got, ref)
    if not error <= tol:
        what = "loss/gradients" if training else "outputs"
        raise AmpNumericsError(
            f"autocast {what} differ from fp32 by relative error {error:.3g} "
            f"> tolerance {tol:g}; the {dtype} path is faster only if it is right",
            measurement=f"{name}.{dtype}",
            relative_error=error,
            tolerance=tol,
        )
    return error


def compare_autocast(
    bench: Bench,
    model: torch.nn.Module,
    inputs: Sequence[Any],
    *,
    loss_fn: LossFn | None = None,
    optimizer: OptimizerFactory | None = None,
    dtypes: Sequence[str] = ("bf16", "fp16"),
    tolerance: dict[str, float] | float | None = None,
    name: str = "amp",
    min_speedup: float | None = None,
    speedup_tolerance: float | None = 0.10,
    items: float | None = None,
    flops: float | None = None,
    allow_emulated: bool = False,
) -> AmpReport:
    """Measure ``model`` as ``<name>.fp32`` and under autocast as ``<name>.<dtype>`` on ``bench.device``.

    ``loss_fn(output) -> scalar`` makes it a training step (with ``optimizer(params)``
    if given), else inference. Each precision runs on its own deep copy of ``model``.
    Dtypes the device cannot run usefully are skipped (:attr:`AmpReport.skipped`)
    unless ``allow_emulated``. Raises :class:`AmpNumericsError` past a dtype's tolerance.
    """
    __tracebackhide__ = True
    unknown = [d for d in dtypes if d not in DTYPES or d == "fp32"]
    if unknown:
        raise ValueError(f"compare_autocast: unknown autocast dtypes {unknown}; use 'bf16' and/or 'fp16'")
    device = bench.device
    tolerances = dict(DEFAULT_TOLERANCE)
    if isinstance(tolerance, dict):
        tolerances.update(tolerance)
    elif tolerance is not None:
        tolerances = {d: float(tolerance) for d in DEFAULT_TOLERANCE}

    skipped = {d: r for d in dtypes if (r := _skip_reason(d, device, allow_emulated)) is not None}
    active = [d for d in dtypes if d not in skipped]
    steps = {d: _Step(copy.deepcopy(model).to(device), d, device, loss_fn, optimizer) for d in ["fp32", *active]}

    # Numerics first: a wrong path should fail without spending the timing budget.
    ref = steps["fp32"].reference(inputs)
    errors = {d: _check(name, d, steps[d].reference(inputs), ref, tolerances[d], loss_fn is not None) for d in active}

    activation: dict[str, int] = {}
    if loss_fn is not None:
        for d, step in steps.items():
            forward: Callable[[], torch.Tensor] = partial(_loss, step, loss_fn, inputs)
            _, activation[d] = saved_activation_bytes(forward, exclude=list(step.model.parameters()))

    measured = {
        d: bench.measure(step, (inputs,), name=f"{name}.{d}", items=items, flops=flops) for d, step in steps.items()
    }
    base = measured["fp32"]
    results: dict[str, PrecisionResult] = {}
    for d in active:
        m = measured[d]
        how = f"fp32 median time / autocast {d} median time on {device}"
        speedup = record_speedup(bench, base, m, tolerance=speedup_tolerance, minimum=min_speedup, how=how)
        bench.metric(
            "numerics_error",
            errors[d],
            better="lower",
            tolerance=None,
            maximum=tolerances[d],
            measurement=m.name,
            description=f"relative error of autocast {d} against fp32",
        )
        memory_saving = None
        if m.peak_allocated_bytes and base.peak_allocated_bytes:
            memory_saving = 1.0 - m.peak_allocated_bytes / base.peak_allocated_bytes
            bench.metric(
                "memory_saving",
                memory_saving,
                better="higher",
                measurement=m.name,
                description=f"1 - peak allocated bytes under {d} / under fp32",
            )
        activation_saving = None
        if activation.get("fp32"):
            activation_saving = 1.0 - activation[d] / activation["fp32"]
            bench.metric(
                "activation_saving",
                activation_saving,
                better="higher",
                measurement=m.name,
                description=f"1 - bytes saved for backward under {d} / under fp32",
            )
        results[d] = PrecisionResult(d, m, errors[d], tolerances[d], speedup, memory_saving, activation_saving)
    return AmpReport(base, results, skipped)
