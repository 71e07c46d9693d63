"""A measurement against its reference: one case per comparison, each through its mode's rule list."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_gpuperf.config import GateSettings
from pytest_gpuperf.model import (
    BaselineEntry,
    Comparison,
    Environment,
    Kind,
    Measurement,
    MeasurementResult,
    Metric,
    Verdict,
)
from pytest_gpuperf.verdict import evidence as ev
from pytest_gpuperf.verdict.case import Case, Evidence
from pytest_gpuperf.verdict.detectable import detectable
from pytest_gpuperf.verdict.pipeline import run_pipeline
from pytest_gpuperf.verdict.rulesets import RuleSet

# What fails a test: a regression always; under --gpuperf-strict (``gpuperf compare --strict``)
# also what could not be judged. The plugin, the reports and the CLI all ask ``failing``.
FAILING_VERDICTS = frozenset({Verdict.REGRESSION})
STRICT_VERDICTS = frozenset({Verdict.NOT_COMPARABLE, Verdict.UNSTABLE, Verdict.NOT_GATED, Verdict.NOT_RESOLVED})


def failing(comparisons: Iterable[Comparison], *, strict: bool) -> list[Comparison]:
    """The comparisons that fail their test: regressions, and with ``strict`` what could not be judged."""
    verdicts = FAILING_VERDICTS | (STRICT_VERDICTS if strict else frozenset())
    return [c for c in comparisons if c.verdict in verdicts]


def fails(result: MeasurementResult, settings: GateSettings) -> bool:
    """Whether ``result`` fails its test under ``settings`` (``failing``)."""
    return bool(failing(result.comparisons, strict=settings.strict))


def absolute_failures(result: MeasurementResult) -> tuple[Comparison, ...]:
    """The comparisons an ``absolute`` step made a regression (a violated hard bound: ``rules.MetricBounds``),
    which fail even an update run (a relative regression does not) and are never written."""
    return tuple(
        c for c in result.comparisons
        if c.verdict is Verdict.REGRESSION and any(n.absolute for n in c.explanation)
    )  # fmt: skip


@dataclass(frozen=True)
class Reference:
    """What a measurement is judged against."""

    entry: BaselineEntry | None = None  # the stored baseline, or the base ref's side as an entry (compare-ref)
    time_evidence: Evidence | None = None  # compare-ref's paired rounds; None: the bootstrap against ``entry``
    other_classes: tuple[str, ...] = ()  # device classes with a baseline for this key when this one has none
    base_ref: str | None = None  # compare-ref: the base ref; None: a stored baseline
    unmeasured: str = ""  # the reference has the test but could not measure it (why): not gated, never new


def judge(
    measurement: Measurement, reference: Reference, settings: GateSettings, rules: RuleSet, environment: Environment
) -> MeasurementResult:
    """Time, peak memory and every metric of ``measurement``, each through its rule list."""
    comparisons = [time_comparison(measurement, reference, settings, rules, environment)]
    if measurement.peak_allocated_bytes is not None:
        case = _case(Kind.MEMORY, "memory.peak_allocated", float(measurement.peak_allocated_bytes), "B",
                     measurement, reference, settings, environment)  # fmt: skip
        comparisons.append(run_pipeline(case, rules.memory))
    for metric in measurement.metrics:
        case = _case(Kind.METRIC, f"metric.{metric.name}", metric.value, metric.unit, measurement, reference,
                     settings, environment, metric=metric)  # fmt: skip
        comparisons.append(run_pipeline(case, rules.metric))
    return MeasurementResult(measurement, tuple(comparisons), reference.entry)


def time_comparison(
    measurement: Measurement,
    reference: Reference,
    settings: GateSettings,
    rules: RuleSet,
    environment: Environment,
    *,
    confirmation: Evidence | None = None,
    suspicion: Verdict | None = None,
) -> Comparison:
    """The time comparison alone; with ``confirmation``, judged on that evidence by the confirmation rules
    (``suspicion``: the change the first reading suspected).

    With an ``auto_threshold``, the threshold is what this reading's evidence resolves, within its bounds
    (``AutoThreshold.pick``); a confirmation is judged at the threshold its first reading chose
    (``confirmation.confirming_gate``)."""
    evidence = confirmation or reference.time_evidence
    entry = reference.entry
    comparable = entry is not None and (
        entry.environment is None or entry.environment.device_class == environment.device_class
    )
    if evidence is None and comparable and entry is not None:
        evidence = ev.against_baseline(measurement, entry, settings)
    current = measurement.stats.get(settings.statistic)
    case = _case(Kind.TIME, f"time.{settings.statistic.value}", current, "ns", measurement, reference, settings,
                 environment, evidence=evidence, suspicion=suspicion)  # fmt: skip
    if settings.auto_threshold is not None and evidence is not None:
        found = detectable(case, settings.threshold)
        threshold = settings.auto_threshold.pick(found.change if found else None)
        settings = dataclasses.replace(settings, threshold=threshold)
        case = dataclasses.replace(case, settings=settings)
    judged = run_pipeline(case, rules.confirmation if confirmation is not None else rules.time)
    if judged.verdict in (Verdict.NEW, Verdict.NOT_COMPARABLE) or evidence is None:
        return judged
    return dataclasses.replace(judged, detectable=detectable(case, settings.threshold))


def _case(
    kind: Kind, name: str, current: float, unit: str, measurement: Measurement, reference: Reference,
    settings: GateSettings, environment: Environment, *, evidence: Evidence | None = None,
    metric: Metric | None = None, suspicion: Verdict | None = None,
) -> Case:  # fmt: skip
    return Case(
        kind=kind, name=name, current=current, unit=unit, measurement=measurement, entry=reference.entry,
        settings=settings, environment=environment, evidence=evidence, metric=metric,
        other_classes=reference.other_classes, base_ref=reference.base_ref, unmeasured=reference.unmeasured,
        suspicion=suspicion,
    )  # fmt: skip
