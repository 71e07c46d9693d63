"""Cold-cache measurements: evict the GPU's L2 between timed calls.

Called in a loop, a memory-bound kernel reads from L2 and looks faster than in a real
model. A write over a buffer larger than L2, queued before the next timing event, evicts
those lines outside the timed region. The CPU has no portable flush: there it does nothing.
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

            # Allocated before the runner resets the peaks: a constant offset that
            # MemoryTracker.exclude takes back out, not a jump in the first round.
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
