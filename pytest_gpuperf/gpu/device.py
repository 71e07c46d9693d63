"""Turning a ``--gpuperf-device`` string into a torch.device, and synchronizing it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from pytest_gpuperf.config import DEVICE_CHOICES, DEVICE_SPEC
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.torch_support import have_torch, require_torch

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class HostCpu:
    """The CPU of a session without torch (torch_support.py): what the measuring code reads of a ``torch.device``.

    Only the CPU path meets it (the wall clock, the host guard); everything that hands a device to torch
    needs torch and asks for it first.
    """

    type: str = "cpu"
    index: int | None = None

    def __str__(self) -> str:
        return self.type


def cuda_device_count() -> int:
    """The CUDA devices this process sees; 0 without torch or CUDA."""
    if not have_torch():
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(spec: str) -> torch.device:
    """Parse a device spec ("auto": the current CUDA device, else the CPU); CUDA always with an explicit index."""
    text = spec.strip().lower()
    if not have_torch() and text in ("cpu", "auto"):
        return cast("torch.device", HostCpu())  # duck-typed: see HostCpu
    if text not in ("cpu", "auto") and DEVICE_SPEC.fullmatch(text) is None:
        raise ConfigError(f"--gpuperf-device: unknown device {spec!r}; use {DEVICE_CHOICES}")
    torch = require_torch(f"--gpuperf-device={spec}")
    if text == "cpu":
        return torch.device("cpu")
    if text == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
    match = DEVICE_SPEC.fullmatch(text)
    assert match is not None  # checked above
    if not torch.cuda.is_available():
        raise ConfigError(
            f"--gpuperf-device={spec}: CUDA is not available "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}); "
            'use "cpu" or "auto"'
        )
    count = torch.cuda.device_count()
    index = int(match["index"]) if match["index"] is not None else torch.cuda.current_device()
    if index >= count:
        raise ConfigError(
            f"--gpuperf-device={spec}: no such GPU; this process sees {count} "
            f"(indices 0..{count - 1}, after CUDA_VISIBLE_DEVICES)"
        )
    return torch.device("cuda", index)


def cuda_synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device``; nothing to wait for on the CPU."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)
