"""Cold-cache measurements: evict the GPU's L2 between timed calls.

A function that reads a few MiB runs from L2 when it is called in a loop,
which makes a memory-bound kernel look faster than it is in a real model,
where other kernels have replaced those lines in between. Writing a buffer
larger than L2 before each timed call evicts them. The write is queued on the
current stream before the next timing event, so it stays outside the timed
region without a host synchronization.

On the CPU the flusher is inactive: there is no portable way to flush the
last-level cache from Python (``clflush`` needs native code, and writing a
buffer larger than the LLC would also evict the measured function's own code
and the interpreter's state), so ``l2_flush`` has no effect there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

FALLBACK_L2_BYTES = 128 * 1024 * 1024  # when the driver does not say; x2 below gives 256 MiB
MARGIN = 2  # replacement is not strict LRU: write twice the capacity


def l2_cache_bytes(device: torch.device) -> int | None:
    """The L2 size the driver reports for ``device``; None when unknown or not CUDA."""
    if device.type != "cuda":
        return None
    import torch

    size = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
    return int(size) if size and size > 0 else None


class L2Flusher:
    """Owns one device buffer of ``2 x L2`` bytes and overwrites it on ``flush()``."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.active = device.type == "cuda"
        self.reason = "" if self.active else "no portable last-level cache flush on the CPU"
        self.l2_bytes = l2_cache_bytes(device) if self.active else None
        self.nbytes = MARGIN * (self.l2_bytes or FALLBACK_L2_BYTES) if self.active else 0
        self.reserved_bytes = 0  # what the buffer added to the allocator's reserved memory
        self._buffer: torch.Tensor | None = None
        if self.active:
            import torch

            # Allocated now, before the runner resets the memory peaks, so the buffer is a
            # constant offset in both peaks (MemoryTracker.exclude takes it back out) rather
            # than a jump in the middle of the first round.
            before = torch.cuda.memory_reserved(device)
            # int32 words: a plain fill kernel at full bandwidth, no byte-granular stores.
            self._buffer = torch.empty(self.nbytes // 4, dtype=torch.int32, device=device)
            self.reserved_bytes = max(0, torch.cuda.memory_reserved(device) - before)

    def flush(self) -> None:
        """Queue a write over the whole buffer on the current stream (a no-op when inactive)."""
        if self._buffer is not None:
            self._buffer.zero_()

    def close(self) -> None:
        """Drop the buffer so the caching allocator can reuse it; later flushes do nothing."""
        self._buffer = None
