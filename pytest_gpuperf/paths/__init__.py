"""Helpers for the performance paths users gate: AMP, torch.compile, DDP, custom kernels.

Each takes the ``gpu_bench`` fixture (or anything shaped like :class:`Bench`) and turns
one optimisation into named measurements plus gateable metrics. torch is imported
inside the submodules, so importing this package stays cheap.

May import: ``gpu``, the model and the leaves; a perf test calls these, the rest of the package does not need them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pytest_gpuperf.model import Direction, Measurement
from pytest_gpuperf.torch_support import INSTALL_HINT, have_torch

if not have_torch():  # every helper here measures torch code
    raise ModuleNotFoundError(f"pytest_gpuperf.paths needs torch, which is not installed: {INSTALL_HINT}", name="torch")

if TYPE_CHECKING:
    import torch


class Bench(Protocol):
    """The part of the ``gpu_bench`` fixture the path helpers use (docs/architecture.md)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def smoke(self) -> bool: ...

    @property
    def device(self) -> torch.device: ...

    def measure(
        self,
        fn: Callable[..., object],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        items: float | None = None,
        flops: float | None = None,
        bytes: float | None = None,
        l2_flush: bool | None = None,
        cuda_graph: bool | None = None,
        energy: bool | None = None,
    ) -> Measurement: ...

    def metric(
        self,
        name: str,
        value: float,
        *,
        unit: str = "",
        better: Direction = "higher",
        tolerance: float | None = 0.10,
        absolute_tolerance: float | None = None,
        minimum: float | None = None,
        maximum: float | None = None,
        measurement: str | None = None,
        description: str = "",
    ) -> object: ...

    def record(self, measurement: Measurement, *, remeasure: Callable[[], Measurement] | None = None) -> object: ...


__all__ = ["Bench"]
