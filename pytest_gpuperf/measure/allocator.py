"""One state of the C allocator in every process that measures.

glibc's mmap and trim thresholds move with a process's history, and a CPU tensor of
1 MiB or more sits right at them: in one process it comes from the heap, in another
every allocation faults in fresh pages, 1.5x or more slower, an offset between
compare-ref's sides no number of rounds averages away. ``settle_allocator`` fixes
both where the dynamic rule would end in a long-running process; thresholds the
user set are kept.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

M_TRIM_THRESHOLD = -1  # <malloc.h>
M_MMAP_THRESHOLD = -3
# glibc's DEFAULT_MMAP_THRESHOLD_MAX (64-bit): the highest the dynamic rule raises it
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES  # the dynamic rule keeps it at twice the mmap threshold
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def user_set_thresholds(environ: dict[str, str] | None = None) -> bool:
    """Whether the process was started with its own malloc thresholds."""
    env = os.environ if environ is None else environ
    return any(name in env for name in USER_SETTINGS) or "glibc.malloc." in env.get("GLIBC_TUNABLES", "")


@functools.cache
def settle_allocator() -> bool:
    """Fix glibc's mmap and trim thresholds in this process (once); False where it does not apply."""
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
