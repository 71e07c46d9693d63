"""Pinning the measuring thread to one CPU core, so two processes compare on the same core.

The cores of a shared VM differ in speed, so for compare-ref on the CPU ``auto`` pins
the head and its base worker (one measures at a time) to the last CPU of the head's
affinity set. Only the measuring thread is pinned, while it measures, and with one
torch intra-op thread: OpenMP threads sharing a core spin waiting for each other.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pytest_gpuperf.config import parse_pin_cpu
from pytest_gpuperf.errors import ConfigError

if TYPE_CHECKING:
    from pytest_gpuperf.modes import ModePlan


def available_cpus() -> set[int]:
    """The CPUs this process may run on (empty where the OS cannot say, e.g. macOS)."""
    getter = getattr(os, "sched_getaffinity", None)
    return set(getter(0)) if getter is not None else set()


def resolve_pin_cpu(setting: str, *, plan: ModePlan, device_type: str) -> int | None:
    """The CPU to measure on, or None for no pinning (``auto`` pins only interleaved rounds on a CPU)."""
    choice = parse_pin_cpu(setting)
    if choice is None or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = available_cpus()
    if choice == "auto":
        if not plan.interleaved or device_type != "cpu" or len(cpus) < 2:
            return None
        return max(cpus)
    cpu = int(choice)
    if cpus and cpu not in cpus:
        raise ConfigError(f"--gpuperf-pin-cpu={cpu}: this process may only run on CPUs {sorted(cpus)}")
    return cpu


@contextlib.contextmanager
def pinned(cpu: int | None) -> Iterator[None]:
    """Run the block with the calling thread on ``cpu`` alone; a no-op for None."""
    if cpu is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        with _one_torch_thread():
            yield
    finally:
        os.sched_setaffinity(0, before)


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    torch = sys.modules.get("torch")  # a suite that never imported torch has no pool to size
    threads = torch.get_num_threads() if torch is not None else 1
    if threads <= 1:
        yield
        return
    assert torch is not None
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
