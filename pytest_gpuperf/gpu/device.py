"""Turning a ``--gpuperf-device`` string into a torch.device, and synchronizing it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_gpuperf.config import DEVICE_CHOICES, DEVICE_SPEC
from pytest_gpuperf.errors import ConfigError

if TYPE_CHECKING:
    import torch


def resolve_device(spec: str) -> torch.device:
    """Parse a device spec ("auto": the current CUDA device, else the CPU); CUDA always with an explicit index."""
    import torch

    text = spec.strip().lower()
    if text == "cpu":
        return torch.device("cpu")
    if text == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
    match = DEVICE_SPEC.fullmatch(text)
    if match is None:
        raise ConfigError(f"--gpuperf-device: unknown device {spec!r}; use {DEVICE_CHOICES}")
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
