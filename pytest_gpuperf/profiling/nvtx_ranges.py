"""NVTX ranges around warm-up and measurement, so Nsight timelines show which test is which.

``nvtx.annotate`` costs a few hundred nanoseconds when no profiler is
attached; ranges wrap whole rounds, never single calls, so that never shows
in a sample.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

DOMAIN = "pytest-gpuperf"


@contextlib.contextmanager
def nvtx_range(message: str, *, enabled: bool = True) -> Iterator[None]:
    """Push an NVTX range named ``message`` in the "pytest-gpuperf" domain for the block.

    A no-op when disabled, when the ``nvtx`` package is missing, or when
    ``NVTX_DISABLE`` is set in the environment.
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
