"""Peak torch memory on the CPU, where torch keeps no allocator statistics.

One extra call runs under torch.profiler with ``profile_memory=True``; its raw
allocation events (bytes allocated and freed, in order) give the peak of live
tensor memory during the call, relative to what was live before it. It counts
torch tensors only, not Python objects, which is what a perf test gates. The
raw events come from the profiler's kineto results; where a torch version does
not offer them the probe returns None and the result says so.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable


def peak_tensor_bytes(call: Callable[[], object]) -> int | None:
    """Peak growth of live CPU tensor memory during one ``call()``, in bytes."""
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler warns about CUPTI etc. on CPU-only builds
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            call()
    try:
        events = prof.profiler.kineto_results.events()
        changes = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    except (AttributeError, RuntimeError):
        return None
    live = peak = 0
    for _, nbytes in changes:
        live += nbytes
        peak = max(peak, live)
    return int(peak)
