"""The final verdict: compare, re-measure a suspected time regression, say why it failed.

Re-measure rule: a time REGRESSION from the first comparison is only a
suspicion. The measurement is taken again (by ``remeasure``: the local engine
uses a fresh process, abtest/fresh.py) up to ``max_remeasures`` times; the
regression stands only if every re-measurement, compared on its own against
the same baseline, is a REGRESSION too. The first one that is not ends the
check, and its comparison is the result (noted as "not confirmed"). Two
independent false alarms in a row are far rarer than one, while a real
slowdown repeats. Memory and metric regressions are not
re-measured: they do not come from timing noise.

Slow-machine rule: when the last re-measure's speed probe (taken in its fresh
process before the test ran, speed_probe.py) reads at least
``SLOW_MACHINE_RATIO`` times the baseline's, the confirmed regression is
reported UNSTABLE instead: the machine's own slowdown explains it as well as
the code does (it fails only with ``--gpuperf-strict``). In the other direction,
a time that is not a regression against a baseline whose writing session's
probe read that much slower than this session's is UNSTABLE too: such a
baseline hides regressions until it is written again. Metrics measured in
seconds (a compile's first call) follow the machine's speed as well: one that
regressed against its baseline while the measurement's probe reads that much
slower is UNSTABLE. Bounds (``maximum``/``minimum``) are the user's absolute
contract and stay failures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from pytest_gpuperf.compare import GateSettings, bound_violation, compare_to_baseline
from pytest_gpuperf.model import (
    BaselineEntry,
    Comparison,
    Environment,
    Measurement,
    MeasurementResult,
    Verdict,
)
from pytest_gpuperf.speed_probe import is_slow, slowdown


def evaluate(
    measurement: Measurement,
    baseline: BaselineEntry | None,
    environment: Environment,
    settings: GateSettings,
    *,
    other_class_baselines: Sequence[BaselineEntry] = (),
    remeasure: Callable[[], Measurement] | None = None,
    max_remeasures: int = 1,
) -> MeasurementResult:
    """Compare ``measurement`` with ``baseline`` and confirm a time regression by re-measuring."""
    result = _judge(measurement, baseline, environment, settings, other_class_baselines, remeasure, max_remeasures)
    return _distrust_time_metrics_on_slow_machine(result)


def _judge(
    measurement: Measurement,
    baseline: BaselineEntry | None,
    environment: Environment,
    settings: GateSettings,
    other_class_baselines: Sequence[BaselineEntry],
    remeasure: Callable[[], Measurement] | None,
    max_remeasures: int,
) -> MeasurementResult:
    def judge(m: Measurement) -> tuple[Comparison, ...]:
        return compare_to_baseline(m, baseline, environment, settings, other_class_baselines=other_class_baselines)

    comparisons = judge(measurement)
    if not _time_regressed(comparisons):
        return _check_baseline_speed(measurement, comparisons, baseline)
    if remeasure is None or max_remeasures <= 0:
        return MeasurementResult(measurement, comparisons, baseline)

    history = [_time(comparisons)]
    current, current_comps = measurement, comparisons
    for attempt in range(1, max_remeasures + 1):
        fresh = remeasure()
        fresh_comps = judge(fresh)
        history.append(_time(fresh_comps))
        current, current_comps = fresh, fresh_comps
        if not _time_regressed(fresh_comps):
            note = f"suspected regression not confirmed on re-measure {attempt}: {_changes(history)}"
            return _result(current, current_comps, baseline, note)
    ratio = slowdown(current.speed_probe_ns, baseline.speed_probe_ns if baseline is not None else None)
    if is_slow(ratio):
        note = (
            f"not judged: the machine ran x{ratio:.2f} slower than when the baseline was written "
            f"(speed probe before the re-measure), which alone explains a regression of this kind; "
            f"changes {_changes(history)}"
        )
        return _result(current, _unstable_time(current_comps), baseline, note)
    note = f"confirmed by {max_remeasures} re-measure(s): {_changes(history)}"
    return _result(current, current_comps, baseline, note)


def _check_baseline_speed(
    measurement: Measurement, comparisons: tuple[Comparison, ...], baseline: BaselineEntry | None
) -> MeasurementResult:
    """Unchanged or faster against a baseline written on a far slower machine: not judged.

    A baseline written while the machine ran slow (by the speed probes of the
    writing session and of this one) makes every later run look faster, so a
    real regression reads as unchanged until the baseline is written again.
    """
    ratio = slowdown(measurement.speed_probe_ns, baseline.speed_probe_ns if baseline is not None else None)
    time_comp = next((c for c in comparisons if c.metric.startswith("time.")), None)
    if ratio is None or not is_slow(1.0 / ratio) or time_comp is None or time_comp.verdict is Verdict.NOT_COMPARABLE:
        return MeasurementResult(measurement, comparisons, baseline)
    note = (
        f"not judged: the baseline was written while the machine ran x{1.0 / ratio:.2f} slower than now "
        "(speed probes before the first measurement), so a regression could hide behind it; write it again"
    )
    return _result(measurement, _unstable_time(comparisons), baseline, note)


# Units of Metric values that are durations, so that a slower machine makes them larger.
_TIME_UNITS = frozenset({"s", "ms", "us", "ns"})


def _distrust_time_metrics_on_slow_machine(result: MeasurementResult) -> MeasurementResult:
    """A duration metric that regressed while the machine ran slow is not judged.

    Metrics are not re-measured (a test yields one value each), so the probe
    the measurement carries decides: the session's, or the fresh re-measure's.
    """
    baseline = result.baseline
    ratio = slowdown(result.measurement.speed_probe_ns, baseline.speed_probe_ns if baseline is not None else None)
    if not is_slow(ratio):
        return result
    durations = {
        f"metric.{m.name}" for m in result.measurement.metrics if m.unit in _TIME_UNITS and bound_violation(m) is None
    }
    distrusted = [c for c in result.comparisons if c.metric in durations and c.verdict is Verdict.REGRESSION]
    if not distrusted:
        return result
    note = (
        f"not judged: the machine ran x{ratio:.2f} slower than when the baseline was written (speed probe), "
        "which alone explains a longer duration"
    )
    comparisons = tuple(
        dataclasses.replace(c, verdict=Verdict.UNSTABLE, note=f"{c.note}; {note}" if c.note else note)
        if c in distrusted else c
        for c in result.comparisons
    )
    names = ", ".join(c.metric for c in distrusted)
    measured = dataclasses.replace(result.measurement, notes=(*result.measurement.notes, f"{names}: {note}"))
    return MeasurementResult(measured, comparisons, baseline)


def _unstable_time(comparisons: Sequence[Comparison]) -> tuple[Comparison, ...]:
    time_comp = _time(comparisons)
    return tuple(dataclasses.replace(c, verdict=Verdict.UNSTABLE) if c is time_comp else c for c in comparisons)


def _time(comparisons: Sequence[Comparison]) -> Comparison:
    return next(c for c in comparisons if c.metric.startswith("time."))


def _time_regressed(comparisons: Sequence[Comparison]) -> bool:
    return any(c.metric.startswith("time.") and c.verdict is Verdict.REGRESSION for c in comparisons)


def _changes(history: Sequence[Comparison]) -> str:
    return " then ".join("n/a" if c.change is None else f"{c.change:+.1%}" for c in history)


def _result(
    measurement: Measurement, comparisons: tuple[Comparison, ...], baseline: BaselineEntry | None, note: str
) -> MeasurementResult:
    time_comp = _time(comparisons)
    joined = f"{time_comp.note}; {note}" if time_comp.note else note
    updated = tuple(dataclasses.replace(c, note=joined) if c is time_comp else c for c in comparisons)
    measured = dataclasses.replace(measurement, notes=(*measurement.notes, note))
    return MeasurementResult(measured, updated, baseline)


def fails(result: MeasurementResult, settings: GateSettings) -> bool:
    """Whether the test fails: any regression; with ``strict`` also not-comparable or unstable."""
    failing = {Verdict.REGRESSION}
    if settings.strict:
        failing |= {Verdict.NOT_COMPARABLE, Verdict.UNSTABLE}
    return any(c.verdict in failing for c in result.comparisons)


def format_value(value: float | None, unit: str) -> str:
    """Human units for a report line: times from ns, memory from bytes."""
    if value is None:
        return "n/a"
    if unit == "ns":
        for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
            if abs(value) >= scale:
                return f"{value / scale:.4g} {name}"
        return f"{value:.4g} ns"
    if unit == "B":
        for scale, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if abs(value) >= scale:
                return f"{value / scale:.4g} {name}"
        return f"{value:.0f} B"
    return f"{value:.6g}{(' ' + unit) if unit else ''}"


def failure_message(result: MeasurementResult, device: str) -> str:
    """One clear message for the failing comparisons of one measurement."""
    key = result.measurement.key
    lines = [f"performance regression in {key}"]
    failing = [c for c in result.comparisons if c.verdict.fails]
    if not failing:
        failing = [c for c in result.comparisons if c.verdict in (Verdict.NOT_COMPARABLE, Verdict.UNSTABLE)]
        lines[0] = f"{key}: {', '.join(sorted({c.verdict.value for c in failing}))} (--gpuperf-strict)"
    for c in failing:
        change = f" ({c.change:+.1%})" if c.change is not None else ""
        lines.append(
            f"  {c.metric}: {format_value(c.baseline, c.unit)} -> {format_value(c.current, c.unit)}{change}"
        )
        if c.evidence:
            lines.append(f"    evidence: {c.evidence}")
        if c.threshold is not None:
            lines.append(f"    threshold: {c.threshold:.1%}")
        if c.note:
            lines.append(f"    note: {c.note}")
    base = result.baseline
    commit = next((c.baseline_commit for c in failing if c.baseline_commit), None)
    if commit is None and base is not None:
        commit = base.provenance.commit
    where = f"  device: {device}"
    if base is not None and base.environment is not None:
        where += f" (baseline device: {base.environment.device_name})"
    lines.append(where)
    lines.append(f"  baseline commit: {commit[:12] if commit else 'unknown'}")
    return "\n".join(lines)
