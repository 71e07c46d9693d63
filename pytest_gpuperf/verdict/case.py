"""What a rule reads: the case being judged and the evidence for a time change."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gpuperf.config import GateSettings
from pytest_gpuperf.model import BaselineEntry, CorrectedChange, Environment, Kind, Measurement, Metric, Verdict


@dataclass(frozen=True)
class Evidence:
    """The ratio current / reference with its confidence interval, and how it was obtained."""

    change: float  # what the verdict reads (+0.12 = 12% more): the gated statistic's, or the paired estimate
    ratio: float
    low: float
    high: float
    p_value: float | None
    method: str
    readings: int  # independent readings (samples, round pairs or process pairs), for the minimum-samples rule
    reference_readings: int
    paired: bool = False  # the change is of per-pair ratios: the reference shown is current / ratio (draft_for)
    # judged on contention-corrected times (evidence.py): the wall clock's own evidence, which users read,
    # and what the correction took out; None where neither side waited for a CPU to speak of
    wall: Evidence | None = None
    correction: CorrectedChange | None = None
    spread: float | None = None  # independent replicates (fresh pairs): their log ratios' spread (detectable.py)
    interval: str = ""  # what the interval is, where it is not one at the gate's confidence ("sequential ...")

    @property
    def shown(self) -> Evidence:
        """The evidence a report shows as the change: the wall clock's."""
        return self.wall or self

    def describe(self, confidence: float) -> str:
        """``ratio 1.520 [1.470, 1.580] 95% CI, p=1e-12, bootstrap of medians``; where the verdict read
        corrected times, the wall clock's evidence first and then the corrected one."""
        from pytest_gpuperf.stats import format_level, format_p

        level = self.interval or f"{format_level(confidence)} CI"
        parts = [f"ratio {self.ratio:.3f} [{self.low:.3f}, {self.high:.3f}] {level}"]
        if self.p_value is not None:
            parts.append(format_p(self.p_value))
        parts.append(self.method)
        said = ", ".join(parts)
        if self.wall is not None:
            return f"{self.wall.describe(confidence)}; judged: {said}"
        return said


@dataclass(frozen=True)
class Case:
    """One comparison to judge: what is compared, against what, under which settings."""

    kind: Kind
    name: str  # the comparison's display name: "time.p50", "memory.peak_allocated", "metric.speedup"
    current: float
    unit: str
    measurement: Measurement
    entry: BaselineEntry | None  # the reference: a stored baseline, or the base ref's side
    settings: GateSettings
    environment: Environment
    evidence: Evidence | None = None  # time only
    metric: Metric | None = None  # metric only
    other_classes: tuple[str, ...] = ()  # device classes that have a baseline when this one has none
    base_ref: str | None = None  # compare-ref: the base ref judged against; None: a stored baseline
    unmeasured: str = ""  # the reference side has this test but could not measure it: why (compare-ref)
    suspicion: Verdict | None = None  # judging a confirmation: the change the first reading suspected

    @property
    def reference_name(self) -> str:
        """What the measurement is judged against, in words: "baseline" or the base ref's name."""
        return "baseline" if self.base_ref is None else self.base_ref

    @property
    def key(self) -> str:
        return self.measurement.key

    @property
    def reference_metric(self) -> Metric | None:
        if self.entry is None or self.metric is None:
            return None
        return next((m for m in self.entry.metrics if m.name == self.metric.name), None)
