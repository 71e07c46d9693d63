"""Peak device memory per measurement, and what to do after an out-of-memory error."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# OOMs that reach Python as a plain RuntimeError (older torch, cuBLAS/cuDNN workspaces).
_OOM_MESSAGES = ("CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED")
_SUMMARY_LINES = 40


def is_oom_error(exc: BaseException) -> bool:
    """True for a CUDA out-of-memory error, whichever torch version raised it."""
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):  # torch.OutOfMemoryError is the same class
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in _OOM_MESSAGES)


class MemoryTracker:
    """The caching allocator's peaks for one CUDA device; none on the CPU (RSS is no per-measurement number)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.active = device.type == "cuda"
        self.excluded_allocated = 0
        self.excluded_reserved = 0

    def exclude(self, allocated: int, reserved: int | None = None) -> None:
        """Leave memory the harness holds (the L2 flush buffer) out of the peaks.

        ``reserved``: what it added to the reserved bytes (0 for a reused block); defaults to ``allocated``.
        """
        reserved = allocated if reserved is None else reserved
        if allocated < 0 or reserved < 0:
            raise ValueError(f"cannot exclude a negative size (allocated={allocated}, reserved={reserved})")
        self.excluded_allocated += allocated
        self.excluded_reserved += reserved

    def reset(self) -> None:
        """Start a new peak window (call right before the measured calls)."""
        if self.active:
            import torch

            torch.cuda.reset_peak_memory_stats(self.device)

    def peak_allocated(self) -> int | None:
        """Bytes held by tensors at the peak since ``reset``."""
        if not self.active:
            return None
        import torch

        return max(0, int(torch.cuda.max_memory_allocated(self.device)) - self.excluded_allocated)

    def peak_reserved(self) -> int | None:
        """Bytes the caching allocator held from the driver at the peak since ``reset``."""
        if not self.active:
            return None
        import torch

        return max(0, int(torch.cuda.max_memory_reserved(self.device)) - self.excluded_reserved)

    def release(self) -> None:
        """Give cached blocks back after an OOM (collecting first: traceback frames hold tensors)."""
        gc.collect()
        if self.active:
            import torch

            torch.cuda.empty_cache()

    def oom_report(self) -> str:
        """A short allocator summary to attach to an OOM failure."""
        if not self.active:
            return f"no CUDA memory summary: the measurement ran on {self.device}"
        import torch

        lines = torch.cuda.memory_summary(self.device, abbreviated=True).splitlines()
        if len(lines) > _SUMMARY_LINES:
            lines = [*lines[:_SUMMARY_LINES], f"... ({len(lines) - _SUMMARY_LINES} more lines)"]
        return "\n".join(lines)
