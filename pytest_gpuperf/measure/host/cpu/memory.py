"""Peak torch memory on the CPU, where torch keeps no allocator statistics.

One extra call runs under the autograd profiler with ``profile_memory=True``; its
raw allocation events give the peak of live tensor memory during the call (torch
tensors only). ``torch.autograd.profiler.profile`` rather than ``torch.profiler``,
whose start-up imports inductor and dynamo (seconds, once per process).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from pytest_gpuperf.profiling.quiet import quiet_profiler


def peak_tensor_bytes(call: Callable[[], object]) -> int | None:
    """Peak growth of live CPU tensor memory during one ``call()``, in bytes; None where it cannot be read.

    A process that has not loaded torch by now (a numpy suite, after the measured calls) holds no tensors:
    no call is spent on it.
    """
    if sys.modules.get("torch") is None:
        return None
    try:
        from torch.autograd.profiler import profile
    except ImportError:
        return None
    # the raw kineto results are not in torch's type stubs
    prof: Any = profile(use_cpu=True, profile_memory=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler warns about CUPTI etc. on CPU-only builds
        with _quiet_stderr():
            prof.__enter__()
        try:
            with quiet_profiler():  # the allocator's warning about blocks from before the profile, not the test's
                call()
        finally:
            with _quiet_stderr():
                prof.__exit__(None, None, None)
    try:
        events = prof.kineto_results.events()
        changes = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    except (AttributeError, RuntimeError):
        return None
    return int(max(itertools.accumulate((nbytes for _, nbytes in changes), initial=0)))


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence the profiler back-end's start/stop lines, which it writes straight to fd 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
