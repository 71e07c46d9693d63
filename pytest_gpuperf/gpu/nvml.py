"""What NVML says about the GPU: identity, clocks, and whether it slowed down while measured.

Nothing here raises without NVML: a failure becomes a note or a missing key,
since a probe that cannot run must never fail a measurement. The clock-event
reason bits are NVML's (nvml.h, nvmlClocksEventReason*), so decoding needs no pynvml.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from pytest_gpuperf.errors import NvmlQueryError
from pytest_gpuperf.model import Note, NoteKind

ClockDomain = Literal["sm", "mem"]
ClockKind = Literal["current", "applications", "default_applications", "max"]

GPU_IDLE = 0x1
APPLICATIONS_CLOCKS_SETTING = 0x2  # also set while clocks are locked by the administrator
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SYNC_BOOST = 0x10
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
DISPLAY_CLOCK_SETTING = 0x100

REASON_NAMES: dict[int, str] = {
    GPU_IDLE: "gpu_idle",
    APPLICATIONS_CLOCKS_SETTING: "applications_clocks_setting",
    SW_POWER_CAP: "sw_power_cap",
    HW_SLOWDOWN: "hw_slowdown",
    SYNC_BOOST: "sync_boost",
    SW_THERMAL_SLOWDOWN: "sw_thermal_slowdown",
    HW_THERMAL_SLOWDOWN: "hw_thermal_slowdown",
    HW_POWER_BRAKE_SLOWDOWN: "hw_power_brake_slowdown",
    DISPLAY_CLOCK_SETTING: "display_clock_setting",
}
# Hardware slowdowns cut clocks hard: the measurement is of the cooling or power supply, unstable.
HARD_SLOWDOWN_MASK = HW_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN
# The driver trims clocks a few percent under sustained load (as in production): throttling only
# below THROTTLE_CLOCK_FRACTION of the applications clock (nvbench's rule and default threshold).
SOFT_SLOWDOWN_MASK = SW_POWER_CAP | SW_THERMAL_SLOWDOWN
SLOWDOWN_MASK = HARD_SLOWDOWN_MASK | SOFT_SLOWDOWN_MASK
THROTTLE_CLOCK_FRACTION = 0.75

DEFAULT_POLL_INTERVAL_S = 0.025
CLOCK_SPREAD_NOTE = 0.02  # SM clock varying by more than this during a measurement is worth saying
LOCK_HINT = "lock them for stable numbers: sudo nvidia-smi -pm 1 && sudo nvidia-smi -lgc <MHz>"


class Nvml(Protocol):
    """The part of NVML this module uses. Handles are opaque."""

    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def device_handle(self, cuda_index: int) -> Any: ...
    def driver_version(self) -> str: ...
    def cuda_driver_version(self) -> int: ...
    def name(self, handle: Any) -> str: ...
    def uuid(self, handle: Any) -> str: ...
    def clock_mhz(self, handle: Any, domain: ClockDomain, kind: ClockKind) -> int: ...
    def power_limit_mw(self, handle: Any) -> int: ...
    def temperature_c(self, handle: Any) -> int: ...
    def persistence_mode(self, handle: Any) -> bool: ...
    def clock_event_reasons(self, handle: Any) -> int: ...
    def power_mw(self, handle: Any) -> int: ...
    def total_energy_mj(self, handle: Any) -> int: ...


T = TypeVar("T")


class PynvmlBackend:
    """``Nvml`` over the nvidia-ml-py package; every pynvml error becomes NvmlQueryError."""

    def __init__(self) -> None:
        self._nvml: Any = None

    def _lib(self) -> Any:
        if self._nvml is None:
            try:
                import pynvml
            except ImportError as exc:  # the dependency is declared, but a broken install must not crash
                raise NvmlQueryError(f"pynvml is not importable ({exc})", query="import pynvml") from exc
            self._nvml = pynvml
        return self._nvml

    def _query(self, name: str, *args: Any) -> Any:
        """``pynvml.<name>(*args)``; its error names it as the query at fault."""
        lib = self._lib()
        fn = getattr(lib, name)
        try:
            return fn(*args)
        except lib.NVMLError as exc:
            raise NvmlQueryError(str(exc), query=getattr(fn, "__name__", repr(fn))) from exc

    def init(self) -> None:
        self._query("nvmlInit")
        _keep_alive(self._lib())

    def shutdown(self) -> None:
        self._query("nvmlShutdown")

    def device_handle(self, cuda_index: int) -> Any:
        # CUDA and NVML may number GPUs differently (CUDA_VISIBLE_DEVICES); the UUID names one GPU.
        uuid = _torch_uuid(cuda_index)
        if uuid is not None:
            with contextlib.suppress(NvmlQueryError):
                return self._query("nvmlDeviceGetHandleByUUID", uuid)
        return self._query("nvmlDeviceGetHandleByIndex", cuda_index)

    def driver_version(self) -> str:
        return str(self._query("nvmlSystemGetDriverVersion"))

    def cuda_driver_version(self) -> int:
        return int(self._query("nvmlSystemGetCudaDriverVersion"))

    def name(self, handle: Any) -> str:
        return str(self._query("nvmlDeviceGetName", handle))

    def uuid(self, handle: Any) -> str:
        return str(self._query("nvmlDeviceGetUUID", handle))

    def clock_mhz(self, handle: Any, domain: ClockDomain, kind: ClockKind) -> int:
        lib = self._lib()
        clock = {"sm": lib.NVML_CLOCK_SM, "mem": lib.NVML_CLOCK_MEM}[domain]
        query = {
            "current": "nvmlDeviceGetClockInfo",
            "applications": "nvmlDeviceGetApplicationsClock",
            "default_applications": "nvmlDeviceGetDefaultApplicationsClock",
            "max": "nvmlDeviceGetMaxClockInfo",
        }[kind]
        return int(self._query(query, handle, clock))

    def power_limit_mw(self, handle: Any) -> int:
        return int(self._query("nvmlDeviceGetPowerManagementLimit", handle))

    def temperature_c(self, handle: Any) -> int:
        return int(self._query("nvmlDeviceGetTemperature", handle, self._lib().NVML_TEMPERATURE_GPU))

    def persistence_mode(self, handle: Any) -> bool:
        return bool(self._query("nvmlDeviceGetPersistenceMode", handle) == self._lib().NVML_FEATURE_ENABLED)

    def power_mw(self, handle: Any) -> int:
        return int(self._query("nvmlDeviceGetPowerUsage", handle))

    def total_energy_mj(self, handle: Any) -> int:
        # Volta and later: millijoules since the driver was last loaded
        return int(self._query("nvmlDeviceGetTotalEnergyConsumption", handle))

    def clock_event_reasons(self, handle: Any) -> int:
        # The "event" name replaced "throttle" in driver 535 / nvidia-ml-py 12.535.
        name = "nvmlDeviceGetCurrentClocksEventReasons"
        if not hasattr(self._lib(), name):
            name = "nvmlDeviceGetCurrentClocksThrottleReasons"
        return int(self._query(name, handle))


_kept_alive: set[int] = set()
_kept_alive_lock = threading.Lock()


def _keep_alive(lib: Any) -> None:
    """Hold one NVML reference until exit: re-initializing enumerates every GPU again (tens of ms)."""
    with _kept_alive_lock:
        if id(lib) in _kept_alive:
            return
        try:
            lib.nvmlInit()
        except lib.NVMLError:
            return
        _kept_alive.add(id(lib))
    atexit.register(_release, lib)


def _release(lib: Any) -> None:
    with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to report to
        lib.nvmlShutdown()


def _torch_uuid(cuda_index: int) -> str | None:
    """NVML's spelling ("GPU-<uuid>") of the UUID torch reports for a CUDA index, if any."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        raw = str(torch.cuda.get_device_properties(cuda_index).uuid)
    except Exception:  # no torch, no CUDA, an old torch without .uuid: fall back to the index
        return None
    if not raw:
        return None
    return raw if raw.startswith(("GPU-", "MIG-")) else f"GPU-{raw}"


def decode_reasons(mask: int) -> list[str]:
    """Names of the bits set in a clock-event reason mask (unknown bits as hex)."""
    names = [name for bit, name in REASON_NAMES.items() if mask & bit]
    unknown = mask & ~sum(REASON_NAMES)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


def format_cuda_version(version: int) -> str:
    """NVML's integer CUDA version (12040) as "12.4"."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def clocks_look_locked(app_sm: int | None, default_app_sm: int | None, reasons: int | None) -> str:
    """Do the SM clocks look pinned by an administrator: "yes", "no" or "unknown".

    NVML has no query for ``nvidia-smi -lgc``; the evidence is the applications-clocks
    limiter being active, or application clocks moved off their default (``-ac``).
    """
    if reasons is not None and reasons & APPLICATIONS_CLOCKS_SETTING:
        return "yes"
    if app_sm is not None and default_app_sm is not None:
        return "yes" if app_sm != default_app_sm else "no"
    return "no" if reasons is not None else "unknown"


def try_query(fn: Callable[..., T], *args: Any) -> T | None:
    """``fn(*args)``, or None where NVML cannot answer it."""
    try:
        return fn(*args)
    except NvmlQueryError:
        return None


def probe_device(index: int, *, nvml: Nvml | None = None) -> dict[str, str]:
    """Identity, clocks and settings of CUDA device ``index``; without NVML ``{"nvml": "unavailable: <why>"}``."""
    api = nvml if nvml is not None else PynvmlBackend()
    handle, unavailable = open_device(api, index)
    if unavailable is not None:
        return {"nvml": unavailable}
    try:
        return _probe(api, handle)
    finally:
        try_query(api.shutdown)


def open_device(api: Nvml, index: int) -> tuple[Any, str | None]:
    """``api`` initialized and the handle of CUDA device ``index``, or why not ("unavailable: ...")."""
    try:
        api.init()
    except NvmlQueryError as exc:
        return None, f"unavailable: {exc}"
    try:
        return api.device_handle(index), None
    except NvmlQueryError as exc:
        try_query(api.shutdown)
        return None, f"unavailable for CUDA device {index}: {exc}"


def _probe(api: Nvml, handle: Any) -> dict[str, str]:
    out: dict[str, str] = {}

    def put(key: str, value: object | None) -> None:
        if value is not None:
            out[key] = str(value)

    put("name", try_query(api.name, handle))
    put("uuid", try_query(api.uuid, handle))
    put("driver", try_query(api.driver_version))
    cuda = try_query(api.cuda_driver_version)
    put("cuda_driver_version", format_cuda_version(cuda) if cuda is not None else None)
    clocks: dict[str, int | None] = {}
    for domain in ("sm", "mem"):
        for kind, label in (
            ("current", "clock"),
            ("max", "max_clock"),
            ("applications", "app_clock"),
            ("default_applications", "default_app_clock"),
        ):
            key = f"{domain}_{label}_mhz"
            clocks[key] = try_query(api.clock_mhz, handle, domain, kind)
            put(key, clocks[key])
    limit = try_query(api.power_limit_mw, handle)
    put("power_limit_w", f"{limit / 1000:g}" if limit is not None else None)
    put("temperature_c", try_query(api.temperature_c, handle))
    persistence = try_query(api.persistence_mode, handle)
    put("persistence_mode", None if persistence is None else ("on" if persistence else "off"))
    reasons = try_query(api.clock_event_reasons, handle)
    put("clock_event_reasons", None if reasons is None else ",".join(decode_reasons(reasons)) or "none")
    out["clocks_locked"] = clocks_look_locked(clocks["sm_app_clock_mhz"], clocks["sm_default_app_clock_mhz"], reasons)
    return out


@dataclass(frozen=True)
class HealthReport:
    """What happened to the GPU during one measurement (``unstable_reason``: clocks slowed by heat or power)."""

    unstable_reason: str | None = None
    notes: tuple[Note, ...] = ()
    data: dict[str, object] = field(default_factory=dict)


class HealthMonitor:
    """Polls NVML in a background thread between ``start()`` and ``stop()``.

    Clock-event reasons are instantaneous, so a slowdown shorter than the poll
    interval can slip through; ``stop()`` reads once more to see one still active.
    """

    def __init__(
        self, device_index: int, *, nvml: Nvml | None = None, poll_interval_s: float = DEFAULT_POLL_INTERVAL_S
    ) -> None:
        self.device_index = device_index
        self.poll_interval_s = poll_interval_s
        self._api: Nvml = nvml if nvml is not None else PynvmlBackend()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reset()

    def _reset(self) -> None:
        self._started = False
        self._handle: Any = None
        self._unavailable: str | None = None
        self._poll_error: str | None = None
        self._seen = 0
        self._polls = 0
        self._slow_polls: dict[str, int] = {}
        self._sm_clocks: list[int] = []
        # Under a soft slowdown: the lowest SM clock polled, and whether a poll could not read it.
        self._soft_lowest_sm: int | None = None
        self._soft_sm_unreadable = False
        self._reference_sm: int | None = None
        self._temp_before: int | None = None
        self._locked_at_start = "unknown"
        self._report: HealthReport | None = None

    def start(self) -> None:
        """Read the starting state and begin polling; never raises for NVML trouble."""
        if self._thread is not None:
            self.stop()
        self._reset()
        self._started = True
        self._handle, unavailable = open_device(self._api, self.device_index)
        if unavailable is not None:
            self._unavailable = f"NVML {unavailable}"
            return
        self._temp_before = try_query(self._api.temperature_c, self._handle)
        app = try_query(self._api.clock_mhz, self._handle, "sm", "applications")
        default = try_query(self._api.clock_mhz, self._handle, "sm", "default_applications")
        self._locked_at_start = clocks_look_locked(app, default, None)
        self._reference_sm = app if app else try_query(self._api.clock_mhz, self._handle, "sm", "max")
        self._poll()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gpuperf-nvml-health", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_interval_s):
            if not self._poll():
                return

    def _poll(self) -> bool:
        """One reading; False once the reasons cannot be read (no point polling on)."""
        try:
            reasons = self._api.clock_event_reasons(self._handle)
        except NvmlQueryError as exc:
            with self._lock:
                self._poll_error = f"clock-event reasons unavailable: {exc}"
            return False
        sm = try_query(self._api.clock_mhz, self._handle, "sm", "current")
        with self._lock:
            self._polls += 1
            self._seen |= reasons
            for name in decode_reasons(reasons & SLOWDOWN_MASK):
                self._slow_polls[name] = self._slow_polls.get(name, 0) + 1
            if reasons & SOFT_SLOWDOWN_MASK:
                if sm is None:
                    self._soft_sm_unreadable = True
                elif self._soft_lowest_sm is None or sm < self._soft_lowest_sm:
                    self._soft_lowest_sm = sm
            # An idle GPU drops its clocks between launches: not a clock-stability signal.
            if sm is not None and not reasons & GPU_IDLE:
                self._sm_clocks.append(sm)
        return True

    def stop(self) -> HealthReport:
        """Stop polling and say whether the measurement ran at steady clocks."""
        if self._report is not None:
            return self._report
        if not self._started:
            return HealthReport(notes=(Note("GPU health monitor was stopped without being started"),))
        if self._unavailable is not None:
            self._report = HealthReport(notes=(Note(self._unavailable),))
            return self._report
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(1.0, 10 * self.poll_interval_s))
            self._thread = None
        if self._poll_error is None:
            self._poll()
        temp_after = try_query(self._api.temperature_c, self._handle)
        try_query(self._api.shutdown)
        self._report = self._build(temp_after)
        return self._report

    def _judge_slowdowns(
        self, seen: int, slow: dict[str, int], polls: int, lowest: int | None
    ) -> tuple[str | None, str]:
        """(unstable reason or None, a note); ``lowest``: the lowest SM clock under a soft slowdown, None if unread."""

        def found(mask: int) -> str:
            return ", ".join(f"{n} ({slow.get(n, 0)}/{polls} polls)" for n in decode_reasons(seen & mask))

        hard = seen & HARD_SLOWDOWN_MASK
        soft = seen & SOFT_SLOWDOWN_MASK
        if hard:
            return f"GPU clocks were slowed during the measurement: {found(hard | soft)}", ""
        if not soft:
            return None, ""
        reference = self._reference_sm
        if reference is None or lowest is None:
            # Without the clocks there is no telling a trim from a throttle: assume the worse.
            return f"GPU clocks were slowed during the measurement: {found(soft)} (SM clock unreadable)", ""
        floor = THROTTLE_CLOCK_FRACTION * reference
        if lowest < floor:
            return (
                f"GPU clocks were throttled during the measurement: {found(soft)}; the SM clock fell to "
                f"{lowest} MHz, below {THROTTLE_CLOCK_FRACTION:.0%} of {reference} MHz"
            ), ""
        return None, (
            f"{found(soft)}: the SM clock stayed at {lowest} MHz or more ({lowest / reference:.0%} of "
            f"{reference} MHz, above the {THROTTLE_CLOCK_FRACTION:.0%} throttle threshold), so the result is kept"
        )

    def _build(self, temp_after: int | None) -> HealthReport:
        with self._lock:
            seen, polls, slow = self._seen, self._polls, dict(self._slow_polls)
            sm = list(self._sm_clocks)
            poll_error = self._poll_error
            soft_lowest = None if self._soft_sm_unreadable else self._soft_lowest_sm
        notes: list[Note] = []
        data: dict[str, object] = {"nvml_polls": polls, "clock_event_reasons": decode_reasons(seen)}
        if self._temp_before is not None:
            data["temperature_before_c"] = self._temp_before
        if temp_after is not None:
            data["temperature_after_c"] = temp_after
        if sm:
            data["sm_clock_min_mhz"] = min(sm)
            data["sm_clock_max_mhz"] = max(sm)
        for name, count in sorted(slow.items()):
            data[f"polls_{name}"] = count
        if poll_error is not None:
            notes.append(Note(poll_error))

        unstable, throttle_note = self._judge_slowdowns(seen, slow, polls, soft_lowest)
        if throttle_note:
            notes.append(Note(throttle_note, NoteKind.ROUTINE))  # the clocks were only trimmed

        locked = "yes" if seen & APPLICATIONS_CLOCKS_SETTING else self._locked_at_start
        if poll_error is not None and locked == "no":
            locked = "unknown"
        data["clocks_locked"] = locked
        if sm and min(sm) > 0 and (max(sm) - min(sm)) / max(sm) > CLOCK_SPREAD_NOTE:
            spread = f"SM clock varied between {min(sm)} and {max(sm)} MHz during the measurement"
            notes.append(Note(f"{spread}; {LOCK_HINT}"))
        elif locked == "no":
            notes.append(Note(f"GPU clocks do not look locked (boost clocks drift with temperature); {LOCK_HINT}"))
        return HealthReport(unstable_reason=unstable, notes=tuple(notes), data=data)
