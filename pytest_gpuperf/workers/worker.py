"""The worker's engine: measures the base ref's code on the head's command, round by round.

The fixture's engine protocol, so the base's tests run through the normal ``gpu_bench``
fixture; nothing is judged here, the finished measurements go back to the head.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_gpuperf.config import Settings
from pytest_gpuperf.errors import WorkerError
from pytest_gpuperf.measure.runner import MeasureSpec, PreparedMeasurement, Runner
from pytest_gpuperf.model import Measurement, MeasurementResult, OpProfile, measurement_key
from pytest_gpuperf.workers import protocol
from pytest_gpuperf.workers.protocol import WorkerChannel, handover_pause_s


class WorkerEngine:
    base_commit = None  # this process measures the base; the head knows its commit

    def __init__(self, runner: Runner, channel: WorkerChannel) -> None:
        self.runner = runner
        self.channel = channel
        # The last test's specs, for PROFILE after it: the head knows of a regression only then.
        self._specs: dict[str, MeasureSpec] = {}

    def start(self, test_ids: Sequence[str]) -> None:
        """The head drives this process from its first command on (worker_plugin.py)."""

    def remember(self, key: str, remeasure: Callable[[], Measurement]) -> None:
        """The head confirms in process pairs of its own: this process takes nothing again."""

    def profile(self, key: str, trace: str | None, calls: int) -> tuple[OpProfile | None, str]:
        """The base's side of a differential profile over ``calls`` calls: (table, trace path), or (None, why not)."""
        from pytest_gpuperf.measure.profiled import profile_here

        spec = self._specs.get(key)
        if spec is None:
            return None, f"{key} was not measured in the base's last test"
        folder = Path(trace).parent if trace else None
        side = profile_here(self.runner, spec, folder, "base", calls)
        if side.profile is None:
            return None, side.problem
        return side.profile, side.trace or ""

    def close(self) -> None:
        """The head ends this process (QUIT)."""

    def measure(self, spec: MeasureSpec, settings: Settings) -> Measurement:
        key = measurement_key(spec.test_id, spec.name)
        if any(not k.startswith(f"{spec.test_id}::") for k in self._specs):
            self._specs.clear()  # a new test: the previous one's functions may be released
        self._specs[key] = spec
        try:
            prepared = self.runner.prepare(spec)
        except Exception as exc:
            self.channel.send(protocol.FAILED, key, f"{type(exc).__name__}: {exc}")
            raise
        self.channel.send(protocol.READY, key)
        while True:
            message = self.channel.recv()
            kind = message[0]
            if kind == protocol.ROUND:
                self.channel.send(protocol.SAMPLES, self._round(prepared, key, float(message[1])))
            elif kind == protocol.FINISH:
                measurement = prepared.finish(peak_memory=bool(message[1]) if len(message) > 1 else True)
                self.channel.send(protocol.FINISHED, measurement)
                return measurement
            elif kind == protocol.SKIP:
                if not prepared.samples:
                    prepared.round(0.0)  # one sample: finish() needs some
                return prepared.finish()
            else:
                raise WorkerError(f"{key}: unexpected command {kind!r} from the head during a measurement")

    def _round(self, prepared: PreparedMeasurement, key: str, budget_s: float) -> list[float]:
        """One round; its samples with their run-queue wait taken out, which the alternation compares."""
        try:
            prepared.round(budget_s)
        except Exception as exc:
            self.channel.send(protocol.FAILED, key, f"{type(exc).__name__}: {exc}")
            raise
        time.sleep(handover_pause_s())  # let this process's OpenMP threads stop spinning (protocol.py)
        return prepared.last_corrected

    def evaluate(self, measurements: Sequence[Measurement], settings: Settings) -> list[MeasurementResult]:
        """Send the base's final measurements (with their metrics) to the head; judge nothing."""
        self.channel.send(protocol.MEASUREMENTS, list(measurements))
        return []
