"""Numbers with units for people, the only place nanoseconds and bytes get them: a time reads the same everywhere.

A leaf module: the reports (``report.units``) and the verdict's notes both format through it."""

from __future__ import annotations

import math

_TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0))
_BYTE_UNITS = (("GiB", 1024.0**3), ("MiB", 1024.0**2), ("KiB", 1024.0), ("B", 1.0))
_ENERGY_UNITS = (("J", 1.0), ("mJ", 1e-3), ("uJ", 1e-6), ("nJ", 1e-9))
_TIME_UNIT_NAMES = {"ns", "nanoseconds"}
_BYTE_UNIT_NAMES = {"b", "bytes", "byte"}
_ENERGY_UNIT_NAMES = {"j", "joules"}


def _digits(value: float) -> str:
    """Four significant digits without an exponent, for values in [0, 10000)."""
    decimals = next(d for d, low in ((0, 1000), (1, 100), (2, 10), (3, 0)) if abs(value) >= low)
    return f"{value:.{decimals}f}"


def _scaled(value: float, units: tuple[tuple[str, float], ...]) -> str:
    if not math.isfinite(value):
        return str(value)
    # Round first so 999.96 us is shown as 1.000 ms, not 1000.0 us; below the last unit, the last one.
    name, factor = next((n, f) for n, f in units if abs(value) >= f * 0.99995 or (n, f) == units[-1])
    return f"{_digits(value / factor)} {name}"


def format_time(ns: float) -> str:
    """``1234.5`` -> ``'1.234 us'``; the unit is picked from the magnitude."""
    return _scaled(float(ns), _TIME_UNITS)


def format_bytes(n: float) -> str:
    """``3 * 2**20`` -> ``'3.000 MiB'`` (binary prefixes, as allocators count)."""
    value = float(n)
    if abs(value) < 1024:
        return f"{value:.0f} B"
    return _scaled(value, _BYTE_UNITS)


def format_energy(joules: float) -> str:
    """``0.0123`` -> ``'12.30 mJ'``: an energy in joules, the prefix picked from the magnitude."""
    return _scaled(float(joules), _ENERGY_UNITS)


def format_value(value: float | None, unit: str) -> str:
    """A comparison's value in its own unit: times, bytes and energies (joules) scaled, others as given."""
    if value is None:
        return "-"
    key = unit.strip().lower()
    if key in _TIME_UNIT_NAMES:
        return format_time(value)
    if key in _BYTE_UNIT_NAMES:
        return format_bytes(value)
    if key in _ENERGY_UNIT_NAMES:
        return format_energy(value)
    number = f"{value:.4g}"
    return f"{number} {unit}".rstrip() if unit else number


def format_change(change: float | None) -> str:
    """A relative change as a signed percentage: ``0.123`` -> ``'+12.3%'``."""
    if change is None or not math.isfinite(change):
        return "-"
    return f"{change * 100:+.1f}%"


def format_precision(precision: float | None) -> str:
    """The relative half-width of the median's CI: ``0.012`` -> ``'±1.2%'``."""
    if precision is None or not math.isfinite(precision):
        return "-"
    return f"±{precision * 100:.1f}%"
