"""The plugin's own exceptions. Each carries the file, test or field at fault."""

from __future__ import annotations

from pathlib import Path


class GpuperfError(Exception):
    """Base class of every error pytest-gpuperf raises on purpose."""


class GpuperfWarning(UserWarning):
    """Something the user should see that does not change the run's outcome (a report not written)."""


class ConfigError(GpuperfError):
    """A bad option, ini value or marker keyword."""

    def __init__(self, message: str, *, test_id: str | None = None) -> None:
        self.test_id = test_id
        prefix = f"{test_id}: " if test_id else ""
        super().__init__(f"{prefix}{message}")


class BaselineError(GpuperfError):
    """A baseline file that cannot be read or written.

    ``json_path`` points inside the document (``$.entries["t::default"].stats``).
    """

    def __init__(self, path: Path | str, message: str, *, json_path: str | None = None) -> None:
        self.path = Path(path)
        self.json_path = json_path
        where = f" at {json_path}" if json_path else ""
        super().__init__(f"baseline file {self.path}{where}: {message}")


class WriteError(GpuperfError):
    """A file (report, trace, baseline) that could not be written; ``reason`` says why."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"cannot write {self.path}: {reason}")


class MeasurementError(GpuperfError):
    """The measured function cannot be timed: a NaN, no samples, a generator for a result, no end."""

    def __init__(self, test_id: str, message: str) -> None:
        self.test_id = test_id
        super().__init__(f"{test_id}: {message}")


class MeasurementTimeout(MeasurementError):
    """A measurement ran past its time limit (``--gpuperf-time-limit``): a call that never returns."""


class WorkerError(GpuperfError):
    """The base-ref worker process of ``--gpuperf-compare-ref`` failed."""
