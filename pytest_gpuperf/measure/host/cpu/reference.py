"""The machine's state beside every test: fixed workloads timed after each of its rounds, in its thread.

A shared CPU runner slows some work for seconds to minutes in ways no counter of the guest sees:
another tenant on the same physical core (a vCPU's hyperthread sibling), on the last-level cache
or on memory bandwidth, a host that lowers the clock. Code measured then reads slower, and a
baseline written then makes later runs read faster. A test's own times cannot tell that from a
change in the code; work of the same kind measured at the same moments can.

``MachineReference`` times one short block of each kind of work after each round of a test, on
the same core and thread, with the round's scheduler accounting (``measure.sched``) so that its
run-queue waits come out as the test's do. What it records, per kind, is the median of those
corrected blocks: the measurement's ``reference_ns``. The kinds span how work meets a shared core:

* ``interpreter``: the Python interpreter's own loop (calls, attribute and dict access, small ints);
  front-end and branch-predictor bound, like pure-Python code and the dispatch of small tensor ops;
* ``vector``: numpy's elementwise float work on a cache-resident buffer; bound by the core's vector
  units, which a hyperthread sibling shares, like elementwise kernels and small matmuls;
* ``memory``: a streaming copy of a buffer twice the size of a core's L2; bound by the shared cache
  and memory bandwidth, like large tensors.

Each kind's block lasts about ``BLOCK_S``, after ``WARM_S`` of the same work untimed: a core that
ran other work for a round has powered its wide vector units down and filled its caches with the
test's, and the first microseconds back would read the test's own footprint, not the machine's
state. The three add about a millisecond to a round of about 100 ms. numpy is a dependency of
the package; nothing here needs torch.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from functools import cache

import numpy as np

from pytest_gpuperf.measure.sched import BlockAccounting
from pytest_gpuperf.measure.timers import WallTimer

BLOCK_S = 0.0003  # each kind's block, per round
WARM_S = 0.00005  # the same work untimed first (the module docstring)
_SIZING_CALLS = 3
_VECTOR_FLOATS = 16_384  # 64 KiB of float32: resident in L1/L2
_MEMORY_BYTES = 4 << 20  # twice a typical 2 MiB L2: every copy streams from the shared cache or memory


def _interpreter_work() -> int:
    """A fixed slice of interpreter work: calls, attribute and dict access, small-int arithmetic."""
    table = {"a": 1, "b": 2}
    total = 0
    for i in range(200):
        total += _step(i, table) & 0xFF
    return total


def _step(i: int, table: dict[str, int]) -> int:
    return (i * 7 + table["a"]) ^ table["b"]


@cache
def _buffers() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The vector and memory work's buffers, allocated once per process (their first touch is not timed)."""
    rng = np.random.default_rng(7)
    vector = rng.random(_VECTOR_FLOATS, dtype=np.float32)
    memory = np.ones(_MEMORY_BYTES // 8)
    return vector, np.empty_like(vector), memory, np.empty_like(memory)


def _vector_work() -> None:
    vector, out, _, _ = _buffers()
    np.tanh(vector, out=out)
    np.multiply(out, vector, out=out)


def _memory_work() -> None:
    _, _, memory, out = _buffers()
    np.copyto(out, memory)


# Each kind's name carries its version: a reference is only ever compared with the same work, so a change
# to a workload takes a new name, and entries that recorded the old one gain the new at the next write.
KINDS: Mapping[str, Callable[[], object]] = {
    "interpreter.1": _interpreter_work,
    "vector.1": _vector_work,
    "memory.1": _memory_work,
}
# How far each kind's reference reads from itself between processes and sessions in one state of the machine
# (benchmarks/reference_spread.py): only a move beyond it is another state. Vector work's speed follows
# the power state of the core's wide units, memory work the other tenants' traffic: both wander more.
NOISE: Mapping[str, float] = {"interpreter.1": 0.10, "vector.1": 0.25, "memory.1": 0.25}
DEFAULT_NOISE = 0.25  # a kind not listed (a test's own, or a newer version read by an older plugin)


class MachineReference:
    """The reference workloads for one measurement: ``step()`` after each round, ``result()`` at its end."""

    def __init__(
        self, kinds: Mapping[str, Callable[[], object]] = KINDS, accounting: BlockAccounting | None = None
    ) -> None:
        self._kinds = dict(kinds)
        self._timer = WallTimer()
        self._calls = {name: self._size(work, BLOCK_S) for name, work in self._kinds.items()}
        self._warm = {name: self._size(work, WARM_S) for name, work in self._kinds.items()}
        self._corrected: dict[str, list[float]] = {name: [] for name in self._kinds}
        self._accounting = accounting or BlockAccounting()

    @staticmethod
    def _size(work: Callable[[], object], seconds: float) -> int:
        """Calls that last about ``seconds`` (the work warmed first)."""
        work()
        start = time.perf_counter()
        for _ in range(_SIZING_CALLS):
            work()
        per_call = (time.perf_counter() - start) / _SIZING_CALLS
        return max(1, round(seconds / max(per_call, 1e-9)))

    def step(self) -> None:
        """One block of each kind, its run-queue wait taken out (``measure.sched``)."""
        accounting = self._accounting
        accounting.begin_round()
        for name, work in self._kinds.items():
            for _ in range(self._warm[name]):
                work()
            calls, since = self._calls[name], accounting.blocks()
            (total,) = self._timer.time_blocks(work, calls, 1, observer=accounting)
            scheduling = accounting.scheduling(calls, since=since)
            waited = 0.0 if scheduling is None else scheduling.caller_wait_ns[0]
            self._corrected[name].append(max(total / calls - waited, 0.0))

    def result(self) -> dict[str, float]:
        """Each kind's median per-call time over the steps, less its waits (empty before any step)."""
        self._accounting.close()
        return {name: statistics.median(values) for name, values in self._corrected.items() if values}
