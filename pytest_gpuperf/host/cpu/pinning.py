"""Pinning the measuring thread to one CPU core, so two processes compare on the same core.

The cores of a shared VM differ in speed (the first usually takes the interrupts
and housekeeping). Under ``--gpuperf-compare-ref`` the head and the base worker
are two processes; on different cores such a difference becomes a steady offset
between the sides that no confidence interval sees. Only one of them measures at
a time, so both can share a core at no cost: ``auto`` pins both to the last CPU
of the head's affinity set (usually the quietest) for compare-ref runs on the CPU.

Only the measuring thread is pinned (``sched_setaffinity(0, ...)`` applies to the
calling thread on Linux), and only while it warms up and measures. Processes the
measured function starts meanwhile (DataLoader workers, DDP ranks) inherit the
one core, on both sides alike. So would the threads of torch's intra-op pool
created meanwhile: several OpenMP threads on one core wait for each other at
every parallel region, spinning for up to a scheduler time slice, which turns
a 40 us operator into milliseconds of noise. Pinned, torch therefore runs with
one intra-op thread (one core cannot run more), and gets its count back after.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from pytest_gpuperf.config import Mode, parse_pin_cpu
from pytest_gpuperf.errors import ConfigError


def available_cpus() -> set[int]:
    """The CPUs this process may run on (empty where the OS cannot say, e.g. macOS)."""
    getter = getattr(os, "sched_getaffinity", None)
    return set(getter(0)) if getter is not None else set()


def resolve_pin_cpu(setting: str, *, mode: Mode, device_type: str) -> int | None:
    """The CPU to measure on, or None for no pinning."""
    choice = parse_pin_cpu(setting)
    if choice is None or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = available_cpus()
    if choice == "auto":
        if mode is not Mode.COMPARE_REF or device_type != "cpu" or len(cpus) < 2:
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
