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


class _FileError(GpuperfError):
    """A file that cannot be read or written; ``json_path`` points inside it (``$.entries["t::default"].stats``)."""

    _what = "file"

    def __init__(self, path: Path | str, message: str, *, json_path: str | None = None) -> None:
        self.path = Path(path)
        self.json_path = json_path
        where = f" at {json_path}" if json_path else ""
        super().__init__(f"{self._what} {self.path}{where}: {message}")


class BaselineError(_FileError):
    """A baseline file that cannot be read or written."""

    _what = "baseline file"


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


class BaseStartError(WorkerError):
    """compare-ref's base worker ended before it collected the tests: the run cannot compare, a usage error."""


class ResultsError(_FileError):
    """A results file that cannot be read or written."""

    _what = "results file"


class NonFiniteNumberError(GpuperfError, ValueError):
    """A NaN or infinity where a baseline file needs a JSON number; ``parts`` is its path in the entry.

    A ValueError: the value is wrong, not a file; the store turns it into a BaselineError naming the file.
    """

    def __init__(self, parts: tuple[str | int, ...], value: float, *, where: str) -> None:
        self.parts = parts
        self.value = value
        super().__init__(f"{where} is {value!r}, which a baseline file cannot store")


class HistoryError(GpuperfError):
    """The baselines folder ``path`` is not in a git repository, or has no history (at ``rev``)."""

    def __init__(self, message: str, *, path: Path | str, rev: str | None = None) -> None:
        self.path = Path(path)
        self.rev = rev
        super().__init__(message)


class StoreError(GpuperfError):
    """The performance history's store cannot be opened, migrated, read or written; ``url`` hides any password.

    ``setting`` names where the address came from (``--history``, ``GPUPERF_HISTORY``), where known.
    """

    def __init__(self, url: str, message: str, *, setting: str | None = None) -> None:
        self.url = url
        self.setting = setting
        prefix = f"{setting}: " if setting else ""
        super().__init__(f"{prefix}history store {url}: {message}")


class StoreAddressError(StoreError):
    """A store address that is not one, or that cannot be read one way only: a usage error naming ``setting``."""


class RunError(GpuperfError, ValueError):
    """A run the history store cannot keep as it is; ``field`` names what (``started_at``, a measurement)."""

    def __init__(self, message: str, *, field: str) -> None:
        self.field = field
        super().__init__(message)


class NoChanges(GpuperfError, ValueError):
    """The ``sessions`` results hold no time change against a baseline (a ValueError: valid, but no answer)."""

    def __init__(self, message: str, *, sessions: int) -> None:
        self.sessions = sessions
        super().__init__(message)


class DdpError(GpuperfError):
    """A DDP measurement whose ranks could not be launched or failed; names the measurement or step factory."""

    def __init__(self, message: str, *, measurement: str | None = None, factory: object = None) -> None:
        self.measurement = measurement
        self.factory = factory
        prefix = f"{measurement}: " if measurement else f"step factory {factory!r}: " if factory is not None else ""
        super().__init__(f"{prefix}{message}")


class AmpNumericsError(AssertionError):
    """An autocast ``measurement`` whose result strays from fp32 by more than its tolerance.

    An AssertionError, not a GpuperfError: a wrong result fails the test as a failed assert does.
    """

    def __init__(self, message: str, *, measurement: str, relative_error: float, tolerance: float) -> None:
        self.measurement = measurement
        self.relative_error = relative_error
        self.tolerance = tolerance
        super().__init__(f"{measurement}: {message}")


class NvmlQueryError(GpuperfError):
    """NVML cannot answer ``query`` (no library, permission or support); the adapter degrades to a note."""

    def __init__(self, message: str, *, query: str | None = None) -> None:
        self.query = query
        super().__init__(message)


class GraphCaptureError(GpuperfError):
    """The measured ``function`` cannot be captured into a CUDA graph; ``where`` names the tensor at fault."""

    def __init__(self, message: str, *, function: str | None = None, where: str | None = None) -> None:
        self.function = function
        self.where = where
        super().__init__(message)


class FixtureAlreadyUsed(Exception):
    """pytest-benchmark's error for a second use of ``benchmark`` in one test, where it is not installed."""


class PytestBenchmarkWarning(UserWarning):
    """pytest-benchmark's warning (an unused ``benchmark`` fixture), where it is not installed."""


class BisectError(GpuperfError):
    """Input ``gpuperf bisect`` cannot work with: an unknown or unsafe ref, an empty range."""


class DashboardError(GpuperfError, ValueError):
    """Input the history dashboard cannot show: names the series, run, change point or profile diff at fault."""
