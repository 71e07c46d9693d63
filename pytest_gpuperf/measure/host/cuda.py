"""The CUDA host guard: NVML health (throttling, clocks), the device's state beside every sample, and the rule that
tells a slower clock from slower code; kernel times do not follow host load."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_gpuperf.model import BaselineEntry, Comparison, Measurement, Verdict
from pytest_gpuperf.verdict.case import Case
from pytest_gpuperf.verdict.pipeline import Step
from pytest_gpuperf.verdict.rules import judged_change
from pytest_gpuperf.verdict.rulesets import GuardRules

if TYPE_CHECKING:
    import torch

    from pytest_gpuperf.gpu.device_state import DeviceSampler
    from pytest_gpuperf.gpu.nvml import HealthMonitor, Nvml
    from pytest_gpuperf.modes import ModePlan

# SM clocks (medians over each side's samples) this close are one speed: a difference below it is not worth a word.
CLOCK_TOLERANCE = 0.02


def _sm_clock(side: Measurement | BaselineEntry | None) -> float | None:
    """A side's SM clock while it ran: the median NVML read beside its samples (None: not read)."""
    if side is None or side.device_state is None:
        return None
    summary = side.device_state.summary if isinstance(side, Measurement) else side.device_state
    clock = summary.sm_clock_mhz
    return clock if clock is not None and clock > 0 else None


@dataclass(frozen=True)
class SmClock:
    """A time change that coincides with a slower SM clock on one side is the card's, not the code's.

    Clock-bound work takes at most as much longer as its clock is slower (time x reference clock / this
    clock; memory-bound work less). A regression measured while this side's SM clock was lower by more
    than ``CLOCK_TOLERANCE`` (an improvement: the reference's), whose interval does not rule out what that
    clock explains, is UNSTABLE: a slower card or a power cap, not slower code. A change beyond what the
    clock explains stands, and the note says how much of it the clock accounts for. The clocks are the
    medians NVML read beside each side's samples (``gpu/device_state.py``); without them, nothing is said.
    """

    name: str = "sm-clock"

    def apply(self, case: Case, draft: Comparison) -> Step | None:
        if draft.verdict not in (Verdict.REGRESSION, Verdict.IMPROVEMENT) or case.evidence is None:
            return None
        here, there = _sm_clock(case.measurement), _sm_clock(case.entry)
        if here is None or there is None:
            return None
        regression = draft.verdict is Verdict.REGRESSION
        slow, fast = (here, there) if regression else (there, here)
        if slow >= fast * (1.0 - CLOCK_TOLERANCE):
            return None
        explains = there / here - 1.0  # the change in time the clocks alone make, for clock-bound work
        ev = case.evidence
        nearest = ev.low - 1.0 if regression else ev.high - 1.0  # the end of the change's interval nearest to none
        beyond = nearest > explains if regression else nearest < explains
        lower = f"{1.0 - slow / fast:.0%} lower {_sides(case, regression)} ({slow:.0f} vs {fast:.0f} MHz, NVML)"
        change = judged_change(case, draft)
        measured = f"{change:+.1%}" if change is not None else "the change"
        if not beyond:
            return Step(
                f"not judged: the SM clock was {lower}: a slower card or a power cap, not slower code; such a clock "
                f"alone can explain up to {explains:+.1%}, and {measured} is within it",
                Verdict.UNSTABLE,
            )
        return Step(f"the SM clock was {lower}, which explains up to {explains:+.1%}: {measured} is more than "
                    "the clock")  # fmt: skip


def _sides(case: Case, regression: bool) -> str:
    """Where the clock was lower, against where it was not: ``at head than at main``, ``in this run than ...``."""
    if case.base_ref is None:
        here, there = "in this run", f"in the {case.reference_name}"
    else:
        here, there = "at head", f"at {case.base_ref}"
    return f"{here} than {there}" if regression else f"{there} than {here}"


def cuda_rules(plan: ModePlan) -> GuardRules:
    """The rules a CUDA host adds to ``plan``'s lists (the same in every mode: each side records its clocks)."""
    return GuardRules(time=(SmClock(),))


class CudaHostGuard:
    """``nvml``: the NVML to read (None: the driver's, through nvidia-ml-py)."""

    name = "cuda"
    pin_cpu = None

    def __init__(self, device: torch.device, *, nvml: Nvml | None = None) -> None:
        self.device = device
        self.nvml = nvml

    def rules(self, plan: ModePlan) -> GuardRules:
        # throttling reaches the verdict as the measurement's unstable_reason (rule "health")
        return cuda_rules(plan)

    def pinned(self) -> AbstractContextManager[object]:
        return contextlib.nullcontext()

    measures_peak_memory = False

    def peak_memory(self, call: Callable[[], object]) -> int | None:
        return None  # the CUDA caching allocator keeps its own peak (gpu/memory.py)

    def health_monitor(self) -> HealthMonitor | None:
        from pytest_gpuperf.gpu.nvml import HealthMonitor

        return HealthMonitor(self.device.index or 0, nvml=self.nvml)

    def device_sampler(self) -> DeviceSampler:
        """The reader of the device's clocks, power, temperature and energy beside every sample."""
        from pytest_gpuperf.gpu.device_state import DeviceSampler, StreamMarks

        marks = StreamMarks(self.device) if self.device.type == "cuda" else None  # a CPU device: tests, with a fake
        return DeviceSampler(self.device.index or 0, nvml=self.nvml, marks=marks)

    def reference(self) -> None:
        return None  # kernel times do not follow the host's state

    def busy(self, health: Mapping[str, object]) -> str | None:
        return None  # kernel times do not follow host load; throttling is NVML's (unstable_reason)

    @property
    def busy_ends_write(self) -> bool:
        return False  # never busy
