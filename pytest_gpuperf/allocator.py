"""One state of the C allocator in every process that measures.

glibc's malloc serves a request above its *mmap threshold* with a fresh
``mmap`` (and gives it back with ``munmap`` when freed), and returns the top of
its heap to the system once more than the *trim threshold* lies free there.
Both thresholds move on their own (the dynamic threshold: freeing an mmapped
chunk raises the mmap threshold to its size, and the trim threshold to twice
that), so where they stand depends on everything the process allocated and
freed before: its imports, its collection, the tests it ran, the lengths of its
paths. A CPU tensor of 1 MiB or more sits right at those thresholds. In one
process its every allocation is served from the heap; in another, the same
code's every allocation maps fresh pages and faults each of them in (hundreds
to thousands of page faults per call, measured with ``getrusage``): the same
test then runs 1.5x or more slower in that process, for as long as it lives.
Two processes started alike still land in different states, so compare-ref's
sides (and a baseline-mode session against its fresh re-measures) would differ
by a per-process offset no amount of rounds averages away.

``settle_allocator`` fixes both thresholds (``mallopt``, which also turns the
dynamic adjustment off) at the values the dynamic rule would reach in a
long-running process that has freed a large block: every allocation below
32 MiB is served from the heap, and the heap is trimmed only past 64 MiB free.
Every measuring process calls it once, at the start of its runner, so all of
them measure in the same state. A user who sets the thresholds (the
``MALLOC_*_`` variables or glibc's malloc tunables) keeps them. Not glibc (musl,
macOS, Windows): nothing to do.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1  # <malloc.h>
M_MMAP_THRESHOLD = -3
# glibc's DEFAULT_MMAP_THRESHOLD_MAX (64-bit): the highest the dynamic rule raises it
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES  # the dynamic rule keeps it at twice the mmap threshold
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")

_settled: bool | None = None


def user_set_thresholds(environ: dict[str, str] | None = None) -> bool:
    """Whether the process was started with its own malloc thresholds."""
    env = os.environ if environ is None else environ
    return any(name in env for name in USER_SETTINGS) or "glibc.malloc." in env.get("GLIBC_TUNABLES", "")


def settle_allocator() -> bool:
    """Fix glibc's mmap and trim thresholds in this process (once); False where it does not apply."""
    global _settled
    if _settled is None:
        _settled = _settle()
    return _settled


def _settle() -> bool:
    if not sys.platform.startswith("linux") or sys.maxsize <= 2**32 or user_set_thresholds():
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc only: musl has no thresholds to move)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
