"""The device's state beside every sample: NVML read around the blocks of a measurement's rounds.

The runner gives a ``DeviceSampler`` to the timer with its other block observers. ``after_block`` runs
once a block is launched, outside the timed region, and reads the clock-event reasons, the SM and memory
clocks, the power draw and the temperature: five NVML queries of microseconds to tens of microseconds
each. The host launches a round's blocks ahead of the device, so on CUDA a reading first waits for the
block before to end (an event on the stream): the device is then running the block just launched, and
stays busy, since that one is queued already. Readings may take at most ``READ_SHARE`` of the host's
time: a block is read once the time since the last reading reaches the readings' own mean cost over
that share, and the first block of every round always is; a sample without a reading of its own
carries the round's last one. NVML's total-energy counter (millijoules, Volta and later) is read around every round,
and the energy per call is the rounds' mean power times the device time per call; where the device has
no counter, each sample's power reading times its device time, said so.

Nothing here raises for NVML trouble: a quantity NVML cannot answer is left out.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from pytest_gpuperf.gpu.nvml import (
    GPU_IDLE,
    HARD_SLOWDOWN_MASK,
    Nvml,
    PynvmlBackend,
    decode_reasons,
    open_device,
    try_query,  # fmt: skip
)
from pytest_gpuperf.model import ENERGY_METRIC, DeviceState, DeviceSummary, EnergySource, Metric, Note, NoteKind

if TYPE_CHECKING:
    import torch

READ_SHARE = 0.02  # the most of the host's time device-state readings may take
# Energy per call follows the device's time and power: a tenth more is the smallest change worth a verdict,
# as for the user's own metrics by default.
ENERGY_TOLERANCE = 0.10
_COUNTER_DESCRIPTION = "device energy per call: the rounds' mean power (NVML's energy counter) x device time per call"
_POWER_DESCRIPTION = (
    "device energy per call: each sample's power reading x its device time (no energy counter on this device: "
    "an estimate, NVML's power is an average over up to a second on recent GPUs)"
)


class Marks(Protocol):
    """A mark behind the work queued so far, and a wait for it: what lets the host read the device while it works."""

    def mark(self) -> None: ...

    def wait(self) -> None: ...


class StreamMarks:
    """``Marks`` on a CUDA device's current stream: one event, waited on, then recorded again."""

    def __init__(self, device: torch.device) -> None:
        import torch

        self._stream = torch.cuda.current_stream(device)
        self._event = torch.cuda.Event()
        self._marked = False

    def mark(self) -> None:
        self._event.record(self._stream)
        self._marked = True

    def wait(self) -> None:
        if self._marked:
            self._event.synchronize()


class _Reading(NamedTuple):
    """One reading; None where the quantity cannot be read."""

    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    power_w: float | None
    temperature_c: float | None
    reasons: int | None


@dataclass(frozen=True)
class DeviceReport:
    """What the sampler found: the state per sample, the energy metric if asked, a slowdown, notes."""

    state: DeviceState | None = None
    energy: Metric | None = None
    unstable_reason: str | None = None
    notes: tuple[Note, ...] = ()


class DeviceSampler:
    """Reads NVML around the blocks of a measurement's rounds (a ``BlockObserver``); ``finish`` says what it read.

    ``marks``: where the host runs ahead of the device (CUDA), how a reading waits for the block before;
    None where each block has ended when it returns (the CPU). ``clock``: nanoseconds, for the readings'
    cost and the rounds' length (injectable for tests).
    """

    def __init__(self, device_index: int, *, nvml: Nvml | None = None, marks: Marks | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns, read_share: float = READ_SHARE) -> None:  # fmt: skip
        self.device_index = device_index
        self._marks = marks
        self._api: Nvml = nvml if nvml is not None else PynvmlBackend()
        self._clock = clock
        self._read_share = read_share
        self._handle: Any = None
        self._unavailable: str | None = None
        self._queries: dict[str, Callable[[], float]] = {}
        self._counter = False
        self._rows: list[_Reading] = []
        self._last: _Reading | None = None
        self._read_now = True
        self._last_read_ns = 0
        self._reads = 0
        self._read_cost_ns = 0
        self._round: tuple[int, int] | None = None  # (clock, energy mJ) at the round's start
        self._energy_mj = 0
        self._rounds_ns = 0
        self._counter_broke = False

    # -- the measurement ------------------------------------------------------------------------

    def start(self) -> None:
        """Open NVML and find what this device answers; never raises."""
        self._handle, self._unavailable = open_device(self._api, self.device_index)
        if self._unavailable is not None:
            return
        api, handle = self._api, self._handle
        candidates: dict[str, Callable[[], float]] = {
            "sm_clock_mhz": lambda: api.clock_mhz(handle, "sm", "current"),
            "mem_clock_mhz": lambda: api.clock_mhz(handle, "mem", "current"),
            "power_w": lambda: api.power_mw(handle) / 1000.0,
            "temperature_c": lambda: api.temperature_c(handle),
            "reasons": lambda: api.clock_event_reasons(handle),
        }
        self._queries = {name: query for name, query in candidates.items() if try_query(query) is not None}
        self._counter = try_query(api.total_energy_mj, handle) is not None

    @property
    def active(self) -> bool:
        return self._unavailable is None and self._handle is not None

    def begin_round(self) -> None:
        """A round starts: its first block is read, and the energy counter now."""
        self._read_now = True
        if self.active and self._counter and not self._counter_broke:
            energy = try_query(self._api.total_energy_mj, self._handle)
            self._round = None if energy is None else (self._clock(), energy)

    def before_block(self) -> None:
        return None  # a reading before the launch would see the device still running the block before it

    def after_block(self, block_ns: float) -> None:
        if not self.active:
            return
        now = self._clock()
        if self._read_now or self._last is None or now - self._last_read_ns >= self._interval_ns():
            if self._marks is not None:
                self._marks.wait()  # the block before has ended: the device runs this one
            self._last = self._read()
            self._read_now = False
        self._rows.append(self._last)
        if self._marks is not None:
            self._marks.mark()

    def end_round(self) -> None:
        """A round ended (the device is done with it): the energy it took."""
        if self._round is None:
            return
        start_ns, start_mj = self._round
        self._round = None
        energy = try_query(self._api.total_energy_mj, self._handle)
        if energy is None or energy < start_mj:  # unreadable now, or the driver was reloaded: no counter
            self._counter_broke = True
            return
        self._energy_mj += energy - start_mj
        self._rounds_ns += self._clock() - start_ns

    def _interval_ns(self) -> float:
        """How long after a reading the next one is due: its mean cost over the share it may take."""
        return (self._read_cost_ns / max(self._reads, 1)) / self._read_share

    def _read(self) -> _Reading:
        start = self._clock()
        values = {name: try_query(query) for name, query in self._queries.items()}
        end = self._clock()
        self._reads += 1
        self._read_cost_ns += end - start
        self._last_read_ns = end
        last = self._last
        for name, value in values.items():  # a query that fails now and then: the value before it
            if value is None and last is not None:
                values[name] = getattr(last, name)
        reasons = values.get("reasons")
        return _Reading(values.get("sm_clock_mhz"), values.get("mem_clock_mhz"), values.get("power_w"),
                        values.get("temperature_c"), None if reasons is None else int(reasons))  # fmt: skip

    # -- what it read ---------------------------------------------------------------------------

    def finish(self, samples_ns: Sequence[float], *, energy: bool = False) -> DeviceReport:
        """The state per sample of ``samples_ns`` (per call, one per observed block), the energy metric if asked."""
        if not self.active:
            said = f"energy per call not measured: NVML {self._unavailable or 'was not started'}"
            return DeviceReport(notes=(Note(said),) if energy else ())
        try_query(self._api.shutdown)
        if len(self._rows) != len(samples_ns) or not samples_ns:
            said = "device state not kept: its readings do not line up with the samples (a round broke off)"
            return DeviceReport(notes=(Note(said, NoteKind.ROUTINE),))
        columns = {name: tuple(float(getattr(r, name)) for r in self._rows) for name in _Reading._fields
                   if name in self._queries and all(getattr(r, name) is not None for r in self._rows)}  # fmt: skip
        reasons = tuple(int(v) for v in columns.get("reasons", ()))
        power = columns.get("power_w", ())
        metric, source, notes = self._energy(samples_ns, power) if energy else (None, None, [])
        state = DeviceState(
            sm_clock_mhz=columns.get("sm_clock_mhz", ()), mem_clock_mhz=columns.get("mem_clock_mhz", ()),
            power_w=power, temperature_c=columns.get("temperature_c", ()), reasons=reasons, readings=self._reads,
            reading_ns=self._read_cost_ns / max(self._reads, 1), summary=_summary(columns, reasons),
            energy_source=source,
        )  # fmt: skip
        return DeviceReport(state, metric, _slowdown(reasons), tuple(notes))

    def _energy(
        self, samples_ns: Sequence[float], power_w: Sequence[float]
    ) -> tuple[Metric | None, EnergySource | None, list[Note]]:
        """Energy per call: the counter's mean power x the mean device time, else each sample's power x its time."""
        notes: list[Note] = []
        if self._counter and not self._counter_broke and self._energy_mj > 0 and self._rounds_ns > 0:
            watts = (self._energy_mj / 1e3) / (self._rounds_ns / 1e9)
            joules = watts * statistics.fmean(samples_ns) / 1e9
            return _energy_metric(joules, _COUNTER_DESCRIPTION), EnergySource.COUNTER, notes
        if self._counter:
            notes.append(Note(f"NVML's energy counter did not advance over {self._rounds_ns / 1e9:.3g} s of rounds: "
                              "energy per call from power readings instead", NoteKind.ROUTINE))  # fmt: skip
        if power_w:
            joules = statistics.fmean(w * ns / 1e9 for w, ns in zip(power_w, samples_ns, strict=True))
            notes.append(Note(_POWER_DESCRIPTION, NoteKind.ROUTINE))
            return _energy_metric(joules, _POWER_DESCRIPTION), EnergySource.POWER, notes
        notes.append(Note("energy per call not measured: NVML reports neither an energy counter nor the power "
                          "draw of this device"))  # fmt: skip
        return None, None, notes


def _energy_metric(joules: float, description: str) -> Metric:
    return Metric(ENERGY_METRIC, joules, unit="J", better="lower", tolerance=ENERGY_TOLERANCE,
                  description=description)  # fmt: skip


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _summary(columns: dict[str, tuple[float, ...]], reasons: tuple[int, ...]) -> DeviceSummary:
    """Medians over the samples whose reading found the device working (an idle device drops its clocks)."""
    working = [i for i, r in enumerate(reasons) if not r & GPU_IDLE] if reasons else None

    def median(name: str) -> float | None:
        values = columns.get(name, ())
        if working is not None:
            values = tuple(values[i] for i in working) if values else ()
        return _median(values)

    return DeviceSummary(median("sm_clock_mhz"), median("mem_clock_mhz"), median("power_w"), median("temperature_c"))


def _slowdown(reasons: tuple[int, ...]) -> str | None:
    """The unstable reason where any sample's reading found a hardware slowdown (health rule), else None."""
    slowed = [r & HARD_SLOWDOWN_MASK for r in reasons if r & HARD_SLOWDOWN_MASK]
    if not slowed:
        return None
    seen = 0
    for r in slowed:
        seen |= r
    names = ", ".join(decode_reasons(seen))
    return f"GPU clocks were slowed during {len(slowed)} of {len(reasons)} samples: {names}"
