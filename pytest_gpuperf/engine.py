"""Measurement engines: what the fixture asks to measure a spec and judge a test's measurements.

``LocalEngine`` measures in this process and judges against the git-tracked
baselines (baseline and update modes; smoke mode only calls once). The
compare-ref engine (``abtest.engine``) implements the same protocol by
alternating rounds with a worker process running the base ref.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from pytest_gpuperf import config as cfg
from pytest_gpuperf.config import GpuperfConfig
from pytest_gpuperf.env import describe_drift
from pytest_gpuperf.model import Environment, Measurement, MeasurementResult, measurement_key
from pytest_gpuperf.runner import MeasureSpec, Runner

if TYPE_CHECKING:
    from pytest_gpuperf.abtest.fresh import FreshProcessRemeasure
    from pytest_gpuperf.baseline.store import BaselineStore
    from pytest_gpuperf.compare import GateSettings
    from pytest_gpuperf.speed_probe import SessionSpeedProbe


class Engine(Protocol):
    def measure(self, spec: MeasureSpec, config: GpuperfConfig) -> Measurement: ...

    def evaluate(
        self, measurements: Sequence[Measurement], config: GpuperfConfig
    ) -> list[MeasurementResult]: ...


def gate_settings(config: GpuperfConfig) -> GateSettings:
    """The gate's knobs for one test (session config with the test's marker applied)."""
    from pytest_gpuperf.compare import GateSettings

    return GateSettings(
        threshold=cfg.DEFAULT_THRESHOLD if config.threshold is None else config.threshold,
        memory_threshold=config.memory_threshold,
        metric=config.metric,
        strict=config.strict,
        use_calibration=config.calibrate == "on",
    )


_NOISY_WRITE_FACTOR = 1.5  # a baseline whose readings raise its threshold past this many times is flagged
_NOISY_WRITE_READINGS = 5  # readings (processes) a noisy baseline is written from at most (odd)


def _chosen_reading(readings: Sequence[Measurement], medians: Sequence[float]) -> Measurement:
    """The reading a baseline is written from: the first of two that agree, else the median one."""
    if len(readings) == 2:
        return readings[0]
    return readings[sorted(range(len(medians)), key=medians.__getitem__)[len(medians) // 2]]


def _raised_threshold(chosen: Measurement, medians: Sequence[float], settings: GateSettings) -> float:
    """The smallest change the entry's recorded noise will let a later gate call (compare.py)."""
    from pytest_gpuperf.stats import noise_floor, recorded_noise

    return noise_floor(recorded_noise(chosen.round_medians_ns, medians), 0.0, settings.noise_multiplier)


def _spread_threshold(medians: Sequence[float], settings: GateSettings) -> float:
    """The part of ``_raised_threshold`` that the readings' spread sets: what more readings can change."""
    from pytest_gpuperf.stats import between_process_noise, noise_floor

    return noise_floor(between_process_noise(medians), 0.0, settings.noise_multiplier)


class LocalEngine:
    """Measure here; compare with the baseline store."""

    def __init__(self, runner: Runner, store: BaselineStore, environment: Environment) -> None:
        self.runner = runner
        self.store = store
        self.environment = environment
        self._specs: dict[str, MeasureSpec] = {}
        self._recorded: dict[str, Callable[[], Measurement]] = {}
        self._fresh: FreshProcessRemeasure | None = None
        self._speed_probe: SessionSpeedProbe | None = None  # made on first use (speed_probe.py)

    def remember(self, key: str, remeasure: Callable[[], Measurement]) -> None:
        """How to take a recorded measurement (DDP ranks) again, for the gate's confirmation."""
        self._recorded[key] = remeasure

    def measure(self, spec: MeasureSpec, config: GpuperfConfig) -> Measurement:
        if not config.enabled:
            return self.runner.smoke(spec)
        if config.calibrate == "on" and spec.calibration is None:
            from pytest_gpuperf.calibration import calibration_for

            spec = dataclasses.replace(spec, calibration=calibration_for(self.runner.options.device))
        self._specs[measurement_key(spec.test_id, spec.name)] = spec
        from pytest_gpuperf.speed_probe import with_probe

        waited = None
        if config.update_baseline:  # a baseline is not measured in a slow moment it could wait out
            probe, waited = self._session_probes().settled_fastest()
        else:
            probe = self._session_speed_probe(config)
        return with_probe(self.runner.measure(spec), probe, waited)

    def _session_probes(self) -> SessionSpeedProbe:
        if self._speed_probe is None:
            from pytest_gpuperf.speed_probe import SessionSpeedProbe

            self._speed_probe = SessionSpeedProbe(self._probe_here)
        return self._speed_probe

    def _session_speed_probe(self, config: GpuperfConfig) -> float | None:
        """The machine's speed now: once when gating, fastest so far when writing baselines."""
        probes = self._session_probes()
        return probes.fastest_so_far() if config.update_baseline else probes.once()

    def _probe_here(self) -> float | None:
        """One speed probe in this process, on the device and core the measurements use."""
        from pytest_gpuperf.speed_probe import measure_speed_probe

        return measure_speed_probe(self.runner.options.device, self.runner.options.pin_cpu)

    def evaluate(self, measurements: Sequence[Measurement], config: GpuperfConfig) -> list[MeasurementResult]:
        from pytest_gpuperf.gate import evaluate

        settings = gate_settings(config)
        results = []
        for m in measurements:
            if m.speed_probe_ns is None:
                # recorded from elsewhere (DDP ranks): the probe is taken now, between tests, so that
                # the speed rules judge these too (written without one, an entry got none of them)
                m = dataclasses.replace(m, speed_probe_ns=self._session_speed_probe(config))
            if config.update_baseline:
                m = self._baseline_reading(m, config, settings)
            baseline = self.store.load(self.environment.device_class, m.test_id, m.name)
            others = (
                [] if baseline is not None
                else self.store.load_other_classes(m.test_id, m.name, exclude=self.environment.device_class)
            )
            drift = describe_drift(baseline.environment if baseline else None, self.environment)
            if drift:
                m = dataclasses.replace(m, notes=(*m.notes, drift))
            results.append(
                evaluate(
                    m,
                    baseline,
                    self.environment,
                    settings,
                    other_class_baselines=others,
                    remeasure=self._remeasure_for(m, config, baseline.speed_probe_ns if baseline else None),
                    max_remeasures=0 if config.update_baseline else config.remeasures,
                )
            )
        return results

    def _baseline_reading(self, m: Measurement, config: GpuperfConfig, settings: GateSettings) -> Measurement:
        """What a baseline is written from: ``m``, checked against an independent measurement.

        A baseline is a frozen number, and one taken while the machine ran slow
        for a few seconds hides regressions until it is written again (the
        detection benchmark missed 15% slowdowns that way). So the test is
        measured again in a fresh process, seconds later: if the two medians
        agree within half the threshold, ``m`` stands; otherwise a third
        measurement, in another new process (not sharing the second's offset),
        decides and the median of the three is written. Readings whose spread would
        raise the entry's threshold past 1.5 times the configured one are joined by
        more, up to five, each in a new process. The readings' medians also
        give the entry its between-run noise (``process_medians_ns``): rounds inside
        one process cannot show the offset each process carries. Each fresh process
        first waits, up to a few seconds, while the machine reads slower than the
        fastest this session has seen, as ``m`` did before it was measured.
        """
        from pytest_gpuperf.gate import format_value

        spec = self._specs.get(m.key)
        if spec is None:  # recorded by hand (DDP ranks): no way to take it again here
            return m
        threshold = settings.threshold
        # each fresh process waits (speed_probe.settled_probe) while the machine reads slower than
        # the fastest this session has seen: readings of a slow moment are what this check is against
        reference = self._speed_probe.fastest_ns if self._speed_probe is not None else m.speed_probe_ns
        readings = [m, self._measure_fresh(spec, config, reference)]
        medians = [r.stats.median_ns for r in readings]  # each .stats sorts all samples: once per reading
        if abs(medians[1] / medians[0] - 1.0) > threshold / 2:
            readings.append(self._measure_fresh(spec, config, reference, new_process=True))
            medians.append(readings[2].stats.median_ns)
        # Readings this far apart would make the entry's recorded noise raise every later
        # threshold (compare.py) past half the threshold again, and the gate would miss the
        # slowdowns it was set to catch (the detection benchmark's eighth and eleventh runs).
        # More readings, each in a new process, let the robust spread and the median ignore a
        # reading or two taken in a slow moment; what they cannot settle is said in the note.
        # Noisy rounds inside the chosen reading are not what more processes would fix.
        noisy = _NOISY_WRITE_FACTOR * threshold
        while len(readings) < _NOISY_WRITE_READINGS and _spread_threshold(medians, settings) > noisy:
            for _ in range(2 if len(readings) % 2 else 1):  # an odd count, so the median is a reading
                readings.append(self._measure_fresh(spec, config, reference, new_process=True))
                medians.append(readings[-1].stats.median_ns)
        chosen = _chosen_reading(readings, medians)
        shown = ", ".join(format_value(x, "ns") for x in medians)
        count = {3: "three", 5: "five"}.get(len(readings), str(len(readings)))
        verdict = "they agree" if len(readings) == 2 else f"the median of the {count} is kept"
        note = f"baseline checked by {len(readings) - 1} independent measurement(s): medians {shown}; {verdict}"
        raised = _raised_threshold(chosen, medians, settings)
        if raised > noisy:
            note += (
                f"; their spread will raise this entry's threshold from {threshold:.1%} to at least {raised:.1%}"
                " (the machine was noisy): write it again on a quieter machine"
            )
        # The machine's speed while the baseline was written: the fastest probe of the readings'
        # processes (a moment of a slow machine at one probe must not mark the entry as written
        # on a slow machine); the test's own metrics stay whichever reading is kept.
        probes = [r.speed_probe_ns for r in readings if r.speed_probe_ns is not None]
        notes = (*chosen.notes, note)
        # a fresh process measures no calibration workload: the session's, taken alongside, stands in
        calibration = chosen.calibration_ns if chosen.calibration_ns is not None else m.calibration_ns
        return dataclasses.replace(
            chosen,
            speed_probe_ns=min(probes, default=None),
            calibration_ns=calibration,
            metrics=m.metrics,
            notes=notes,
            process_medians_ns=tuple(medians),  # the entry's noise (stats.recorded_noise)
        )

    def _remeasure_for(
        self, m: Measurement, config: GpuperfConfig, reference_probe_ns: float | None
    ) -> Callable[[], Measurement] | None:
        spec = self._specs.get(m.key)
        recorded = self._recorded.get(m.key)
        take: Callable[[], Measurement] | None = None
        if spec is not None:
            take = functools.partial(self._measure_fresh, spec, config, reference_probe_ns)
        elif recorded is not None:
            take = functools.partial(self._measure_recorded, recorded, reference_probe_ns)
        if take is None:  # recorded without a way to take it again
            return None
        again = take

        def remeasure() -> Measurement:
            return dataclasses.replace(again(), metrics=m.metrics)

        return remeasure

    def _measure_recorded(
        self, recorded: Callable[[], Measurement], reference_probe_ns: float | None
    ) -> Measurement:
        """A recorded measurement taken again, after a speed probe here (waiting a while if it reads slow).

        Its own processes (DDP ranks) are fresh ones already; the probe is what the
        gate's slow-machine rule reads.
        """
        from pytest_gpuperf.speed_probe import settled_probe, with_probe

        probe, waited = settled_probe(self._probe_here, reference_probe_ns)
        return with_probe(recorded(), probe, waited)

    def _measure_fresh(
        self, spec: MeasureSpec, config: GpuperfConfig, reference_probe_ns: float | None, *, new_process: bool = False
    ) -> Measurement:
        """The spec measured again in a fresh process (abtest/fresh.py says why); here if that cannot run."""
        from pytest_gpuperf.abtest.fresh import FreshProcessRemeasure
        from pytest_gpuperf.errors import WorkerError

        if self._fresh is None:
            opts = self.runner.options
            self._fresh = FreshProcessRemeasure(config.rootdir, str(opts.device), opts.pin_cpu, config.plugin_args)
        key = measurement_key(spec.test_id, spec.name)
        try:
            fresh = self._fresh.measure(spec.test_id, key, spec.settings, reference_probe_ns, new_process=new_process)
        except WorkerError as exc:
            here = self.runner.measure(spec)
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return dataclasses.replace(here, notes=(*here.notes, f"re-measured in this process: no fresh one ({why})"))
        return dataclasses.replace(fresh, notes=(*fresh.notes, "re-measured in a fresh process"))

    def close(self) -> None:
        """Stop the fresh re-measure process, if one was started; never raises."""
        if self._fresh is not None:
            self._fresh.close()
            self._fresh = None
