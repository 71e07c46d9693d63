"""The reports' unit formatters: those of ``pytest_gpuperf.units``, which the verdict's notes use too."""

from __future__ import annotations

from pytest_gpuperf.units import (
    format_bytes,
    format_change,
    format_energy,
    format_precision,
    format_time,
    format_value,
)

__all__ = ["format_bytes", "format_change", "format_energy", "format_precision", "format_time", "format_value"]
