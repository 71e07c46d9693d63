"""pytest-gpuperf: GPU performance regression testing for pytest."""

from __future__ import annotations

from pytest_gpuperf.errors import BaselineError, ConfigError, GpuperfError, MeasurementError
from pytest_gpuperf.model import (
    BaselineEntry,
    Comparison,
    Environment,
    Measurement,
    MeasurementResult,
    Metric,
    Provenance,
    SampleStats,
    Throughput,
    Verdict,
)

__version__ = "0.1.0"

__all__ = [
    "BaselineEntry",
    "BaselineError",
    "Comparison",
    "ConfigError",
    "Environment",
    "GpuperfError",
    "Measurement",
    "MeasurementError",
    "MeasurementResult",
    "Metric",
    "Provenance",
    "SampleStats",
    "Throughput",
    "Verdict",
    "__version__",
]
