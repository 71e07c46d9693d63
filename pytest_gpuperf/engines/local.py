"""``LocalEngine``: measure here and judge against the git-tracked baselines (baseline, update and smoke modes).

A suspected regression is confirmed by re-measures in fresh processes (``workers.fresh``); the
verdict comes from ``verdict/``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf.config import Settings
from pytest_gpuperf.errors import WorkerError
from pytest_gpuperf.measure.env import describe_drift
from pytest_gpuperf.measure.profiled import ProfiledSide, profile_here
from pytest_gpuperf.measure.runner import MeasureSpec, Runner
from pytest_gpuperf.model import (
    BASELINE_WRITE,
    WRITTEN_BUSY,
    BaselineEntry,
    Environment,
    Measurement,
    MeasurementResult,
    Note,
    NoteKind,
    measurement_key,
)
from pytest_gpuperf.profiling.plan import STORED_BUDGET_S, STORED_CALLS
from pytest_gpuperf.profiling.table import stored_table
from pytest_gpuperf.report.progress import Progress
from pytest_gpuperf.report.units import format_time
from pytest_gpuperf.verdict import Reference, judge, readings
from pytest_gpuperf.verdict.confirmation import by_remeasures, confirming_gate, suspicion, time_of, upheld_by
from pytest_gpuperf.verdict.rulesets import RuleSet

if TYPE_CHECKING:
    from pytest_gpuperf.baseline.store import BaselineStore
    from pytest_gpuperf.config import GateSettings
    from pytest_gpuperf.measure.host import HostGuard


from pytest_gpuperf.engines.protocol import FreshReader
from pytest_gpuperf.engines.results import noted, regressed, with_note, with_profile_diff


@dataclass(eq=False)
class LocalEngine:
    """Measure here; judge against the baseline store; confirm in fresh processes."""

    runner: Runner
    store: BaselineStore
    environment: Environment
    guard: HostGuard
    rules: RuleSet  # the mode's rule lists, built once by the session
    fresh: Callable[[], FreshReader] | None = None  # starts the process that re-measures
    progress: Progress = field(default_factory=Progress)
    traces: Path | None = field(default=None, kw_only=True)  # a regression's Chrome traces (GpuperfConfig.traces_dir)
    _reader: FreshReader | None = field(default=None, init=False)
    _specs: dict[str, tuple[MeasureSpec, Settings]] = field(default_factory=dict, init=False)
    _recorded: dict[str, Callable[[], Measurement]] = field(default_factory=dict, init=False)
    base_commit: str | None = field(default=None, init=False)  # the base is the stored baseline entry

    def start(self, test_ids: Sequence[str]) -> None:
        """Nothing runs beside the tests: fresh processes start when a confirmation first needs one."""

    def remember(self, key: str, remeasure: Callable[[], Measurement]) -> None:
        """How to take a recorded measurement (DDP ranks) again, for the confirmation."""
        self._recorded[key] = remeasure

    def measure(self, spec: MeasureSpec, settings: Settings) -> Measurement:
        if not settings.enabled:
            return self.runner.smoke(spec)
        self._specs[measurement_key(spec.test_id, spec.name)] = (spec, settings)
        return self.runner.measure(spec)  # with the machine's reference beside it, where the host has one

    def evaluate(self, measurements: Sequence[Measurement], settings: Settings) -> list[MeasurementResult]:
        results = []
        for m in measurements:
            if settings.plan.writes_baselines:
                m = self._baseline_reading(m, settings.gate)
            baseline = self.store.load(self.environment.device_class, m.test_id, m.name)
            others: tuple[str, ...] = ()
            if baseline is None:
                found = self.store.load_other_classes(m.test_id, m.name, exclude=self.environment.device_class)
                others = tuple(sorted({b.environment.device_class for b in found if b.environment}))
            drift = describe_drift(baseline.environment if baseline else None, self.environment)
            if drift:
                m = noted(m, drift)
            if baseline is not None and baseline.written_busy and not settings.plan.writes_baselines:
                told = f"the baseline was written while the runner was busy ({baseline.written_busy}): write it again"
                m = noted(m, f"{told} in a quieter hour", WRITTEN_BUSY)
            reference = Reference(entry=baseline, other_classes=others)
            result = judge(m, reference, settings.gate, self.rules, self.environment)
            result = self._confirm(result, reference, settings)
            if settings.profile_diff and settings.plan.profiles_regressions and regressed(result):
                result = self._profile_diff(result, baseline)
            results.append(result)
        return results

    def _profile_diff(self, result: MeasurementResult, baseline: BaselineEntry | None) -> MeasurementResult:
        """The head's call profiled here, diffed against the profile stored with the baseline entry."""
        known = self._specs.get(result.measurement.key)
        if known is None:
            return with_note(result, "no profile diff: a recorded measurement (DDP ranks) has no function to profile")
        commit = baseline.provenance.commit if baseline is not None else None
        label = f"baseline {commit[:12]}" if commit else "baseline"
        stored = ProfiledSide(baseline.profile if baseline else None)
        return with_profile_diff(result, lambda calls: profile_here(self.runner, known[0], self.traces, "head", calls),
                                 lambda _calls: stored, base_label=label)  # fmt: skip

    # -- confirming a suspected regression ------------------------------------------------

    def _confirm(self, result: MeasurementResult, reference: Reference, settings: Settings) -> MeasurementResult:
        """Readings in fresh processes until the suspicion is cleared or each re-measure confirms it."""
        first = time_of(result)
        suspected = suspicion(first)
        again = self._remeasure_for(result.measurement, reference)
        if suspected is None or again is None or settings.gate.remeasures <= 0:
            return result

        gate = confirming_gate(settings.gate, suspected, first)

        def take(i: int) -> MeasurementResult:
            self.progress.remeasuring(result.measurement.key, i + 1, settings.gate.remeasures)
            return judge(again(), reference, gate, self.rules, self.environment)

        waves = readings.remeasure_waves(settings.gate.remeasures)
        taken = readings.take_readings(take, waves, readings.remeasure_done(upheld_by(suspected)))
        return by_remeasures(first, taken, suspected)  # what the readings made of it: verdict/confirmation.py

    def _remeasure_for(self, m: Measurement, reference: Reference) -> Callable[[], Measurement] | None:
        """How to take ``m`` again in a fresh process (a recorded one, DDP ranks, is its own processes' already)."""
        known = self._specs.get(m.key)
        recorded = self._recorded.get(m.key)
        if known is not None:
            take: Callable[[], Measurement] = functools.partial(self._measure_fresh, *known)
        elif recorded is not None:
            take = recorded
        else:
            return None
        return lambda: dataclasses.replace(take(), metrics=m.metrics)

    # -- writing a baseline -----------------------------------------------------------------

    def _baseline_reading(self, m: Measurement, gate: GateSettings) -> Measurement:
        """What a baseline is written from: ``m``, with readings in fresh processes (readings.py decides how many).

        Their medians also give the entry its between-run noise (``process_medians_ns``):
        rounds inside one process cannot show the offset each process carries. The first fresh one
        only checks the session's median (readings.check_samples: no more samples than that needs);
        none takes a call for peak memory, which the entry keeps from ``m``.
        """
        known = self._specs.get(m.key)
        if known is None:  # recorded by hand (DDP ranks): no way to take it again here
            return m
        spec, settings = known
        check = readings.check_samples(m.samples_ns, gate.threshold, gate.noise_multiplier)

        def take(i: int) -> Measurement:
            if i == 0:
                return m
            return self._measure_fresh(spec, settings, new_process=i >= 2, peak_memory=False,
                                       check_samples=check if i == readings.CHECK_READING else None)  # fmt: skip

        done = readings.baseline_write_done(gate.threshold, gate.noise_multiplier)

        def settled(rs: list[Measurement], planned: int) -> bool:
            busy = self.guard.busy_ends_write and any(self._busy_uncorrected(r, gate) for r in rs)
            return done([r.corrected.median_ns for r in rs], planned, busy)

        taken = readings.take_readings(take, readings.WRITE_WAVES, settled)
        # the readings' medians less their run-queue wait: what they agree on, and the entry's recorded noise
        medians = [r.corrected.median_ns for r in taken]
        # the check, where it stopped short of a full measurement's samples: never written
        c = readings.CHECK_READING
        short_check = c < len(taken) and taken[c].stats.count < spec.settings.min_samples
        chosen = taken[readings.chosen_reading(medians, {c} if short_check else set())]
        written = Note(self._write_note(chosen, medians, gate), topic=BASELINE_WRITE)
        # the reading written is what the entry keeps: a check that waited past what its accounting can take out
        # only widens the recorded noise (its median is among process_medians_ns), it leaves no busy reference
        busy = self._busy_uncorrected(chosen, gate)
        busy_notes = (
            ()
            if busy is None
            else (  # recorded in the entry, and said each time it is gated against
                Note(
                    f"written while the runner was busy ({busy}) with no correction for it: write it again in a "
                    "quieter hour", topic=WRITTEN_BUSY,
                ),
            )
        )  # fmt: skip
        # the base of a later regression's differential profile; the session's reading (m) warmed this
        # process and timed the call, so the profile makes no unprofiled call first
        side = (
            profile_here(self.runner, spec, None, "baseline", STORED_CALLS, STORED_BUDGET_S,
                         warm_call_s=m.stats.median_ns / 1e9)
            if settings.profile_diff
            else ProfiledSide(None)
        )  # fmt: skip
        problems = (Note(side.problem),) if side.problem else ()
        notes = (*chosen.notes, written, *problems, *busy_notes)
        return dataclasses.replace(
            chosen, written_busy=busy, metrics=m.metrics,
            # the reference of the reading written, else the session's (a check's may not have one)
            reference_ns=chosen.reference_ns or m.reference_ns,
            # peak memory is taken once, by the session's reading: the fresh ones take no call for it
            peak_allocated_bytes=m.peak_allocated_bytes, peak_reserved_bytes=m.peak_reserved_bytes,
            notes=notes, process_medians_ns=tuple(medians), op_profile=stored_table(side.profile),
            profile=chosen.profile or m.profile,  # --gpuperf-profile's capture is taken in the first reading only
        )  # fmt: skip

    def _busy_uncorrected(self, m: Measurement, gate: GateSettings) -> str | None:
        """The host's evidence that ``m`` was measured busy, where its run-queue wait could not be taken out
        closely enough for a baseline (``readings.correction_holds``); None: quiet, or corrected."""
        busy = self.guard.busy(m.health)
        if busy is None or readings.correction_holds(m, gate.threshold):
            return None
        return busy

    @staticmethod
    def _write_note(chosen: Measurement, medians: Sequence[float], gate: GateSettings) -> str:
        shown = ", ".join(format_time(x) for x in medians)
        count = {3: "three", 5: "five"}.get(len(medians), str(len(medians)))
        if len(medians) != 2:
            verdict = f"the median of the {count} is kept"
        elif readings.agree(medians, gate.threshold):
            verdict = "they agree"
        else:  # only on a busy runner does a write end at two that disagree
            verdict = f"the session's is kept ({readings.BUSY_WRITE_ENDS})"
        corrected = chosen.corrected
        less = " (less their run-queue wait)" if corrected.contended else ""
        note = f"baseline checked by {len(medians) - 1} independent measurement(s): medians {shown}{less}; {verdict}"
        if corrected.contended:
            note += (f"; written under contention: {corrected.wait_share:.0%} of its time waited for a CPU, taken out "
                     f"(uncertain by {corrected.uncertainty:.1%})")  # fmt: skip
        raised = readings.spread_threshold(medians, gate.noise_multiplier, chosen.judged_round_medians_ns)
        if readings.too_noisy(raised, gate.threshold):
            note += (
                f"; their spread will raise this entry's threshold from {gate.threshold:.1%} to at least "
                f"{raised:.1%} (the machine was noisy): write it again on a quieter machine"
            )
        return note

    def _measure_fresh(
        self,
        spec: MeasureSpec,
        settings: Settings,
        *,
        new_process: bool = False,
        check_samples: int | None = None,
        peak_memory: bool = True,
    ) -> Measurement:
        """The spec measured again in a fresh process; here if none can run (in full: no check there)."""
        key = measurement_key(spec.test_id, spec.name)
        try:
            if self.fresh is None:
                raise WorkerError("no fresh process in this engine")
            if self._reader is None:
                self._reader = self.fresh()
            fresh = self._reader.measure(spec.test_id, key, settings.measure, new_process=new_process,
                                        check_samples=check_samples, peak_memory=peak_memory)  # fmt: skip
        except WorkerError as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return noted(self.runner.measure(spec), f"re-measured in this process: no fresh one ({why})")
        return noted(fresh, "re-measured in a fresh process", kind=NoteKind.ROUTINE)  # as planned: nothing to act on

    def close(self) -> None:
        """Stop the fresh re-measure process, if one was started; never raises."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
