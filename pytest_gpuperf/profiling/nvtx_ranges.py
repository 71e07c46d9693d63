"""NVTX ranges around warm-up and measurement, so Nsight timelines show which test is which.

A range costs a few hundred nanoseconds; ranges wrap whole rounds, never single calls.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

DOMAIN = "pytest-gpuperf"


@contextlib.contextmanager
def nvtx_range(message: str, *, enabled: bool = True) -> Iterator[None]:
    """Push an NVTX range named ``message`` in the "pytest-gpuperf" domain for the block.

    A no-op when disabled, without the ``nvtx`` package, or with ``NVTX_DISABLE`` set.
    """
    if not enabled:
        yield
        return
    try:
        import nvtx
    except ImportError:
        yield
        return
    with nvtx.annotate(message, domain=DOMAIN):
        yield
