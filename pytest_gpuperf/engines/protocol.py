"""What the fixture and the session call on an engine, and how an engine takes a fresh reading."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pytest_gpuperf.config import MeasureSettings, Settings
    from pytest_gpuperf.measure.runner import MeasureSpec
    from pytest_gpuperf.model import Measurement, MeasurementResult


class Engine(Protocol):
    """What the fixture and the session call on every engine, and all they call."""

    def start(self, test_ids: Sequence[str]) -> None:
        """The perf tests are collected (``test_ids``): begin what runs beside them (compare-ref's base worker)."""

    @property
    def base_commit(self) -> str | None:
        """The commit measured as the base, once known (compare-ref); None where the base is a stored baseline."""

    def remember(self, key: str, remeasure: Callable[[], Measurement]) -> None:
        """How to take a recorded measurement (DDP ranks) again, where the engine confirms by re-measuring."""

    def measure(self, spec: MeasureSpec, settings: Settings) -> Measurement: ...

    def evaluate(self, measurements: Sequence[Measurement], settings: Settings) -> list[MeasurementResult]: ...

    def close(self) -> None: ...


class FreshReader(Protocol):
    """Measures a test's spec again in a fresh process (``workers.fresh``); WorkerError if it cannot."""

    def measure(
        self, test_id: str, key: str, settings: MeasureSettings, *,
        new_process: bool = False, check_samples: int | None = None, peak_memory: bool = True,
    ) -> Measurement: ...  # fmt: skip

    def close(self) -> None: ...
