"""Building measurements and baseline entries, and judging them through the real verdict pipeline."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_gpuperf.config import GateSettings, Mode
from pytest_gpuperf.measure.host.cpu import CpuHostGuard
from pytest_gpuperf.model import (
    BaselineEntry,
    Comparison,
    Environment,
    Kind,
    Measurement,
    MeasurementResult,
    Provenance,
    SampleStats,
)
from pytest_gpuperf.modes import plan_for
from pytest_gpuperf.verdict import Reference, judge
from pytest_gpuperf.verdict.rulesets import RuleSet, baseline_rules, rules_for

ENV = Environment(device_class="cpu-test", device_type="cpu", device_name="cpu", cpu_model="t", python="3")
OTHER = Environment(device_class="cuda-h100", device_type="cuda", device_name="H100", cpu_model="t", python="3")
S = GateSettings()


def cpu_rules(mode: Mode = Mode.BASELINE) -> RuleSet:
    """The rule lists a CPU session of ``mode`` runs (the CPU host guard's rules included)."""
    import torch

    plan = plan_for(mode)
    return rules_for(plan, CpuHostGuard(torch.device("cpu"), plan=plan, pin_cpu="off").rules(plan))


SHARED_RULES = baseline_rules()


def samples(median: float, rel_sd: float = 0.01, n: int = 300, seed: int = 0) -> tuple[float, ...]:
    return tuple(np.random.default_rng(seed).normal(median, median * rel_sd, n))


def rounds(median: float, rel_sd: float, seed: int = 0) -> tuple[float, ...]:
    return tuple(np.random.default_rng(seed + 100).normal(median, median * rel_sd, 8))


def measurement(median: float = 1000.0, **kw: object) -> Measurement:
    fields: dict[str, object] = {
        "test_id": "t.py::test_a", "name": "default", "samples_ns": samples(median, seed=1),
        "calls_per_sample": 1, "device": "cpu", "timer": "perf_counter",
        "round_medians_ns": rounds(median, 0.002, 1),
    }  # fmt: skip
    fields.update(kw)
    return Measurement(**fields)  # type: ignore[arg-type]


def entry(median: float = 1000.0, env: Environment = ENV, **kw: object) -> BaselineEntry:
    data = samples(median, seed=2)
    fields: dict[str, object] = {
        "key": "t.py::test_a::default", "stats": SampleStats.from_samples(data), "samples_ns": data,
        "calls_per_sample": 1, "device": "cpu", "timer": "perf_counter", "environment": env,
        "provenance": Provenance(commit="abc123"),
    }  # fmt: skip
    fields.update(kw)
    if "samples_ns" in kw and "stats" not in kw:
        fields["stats"] = SampleStats.from_samples(kw["samples_ns"])  # type: ignore[arg-type]
    return BaselineEntry(**fields)  # type: ignore[arg-type]


def judged(
    m: Measurement, baseline: BaselineEntry | None, settings: GateSettings = S, *,
    others: Sequence[str] = (), rules: RuleSet | None = None, env: Environment = ENV,
) -> MeasurementResult:  # fmt: skip
    reference = Reference(entry=baseline, other_classes=tuple(others))
    return judge(m, reference, settings, rules or cpu_rules(), env)


def compare(
    m: Measurement, baseline: BaselineEntry | None, settings: GateSettings = S, **kw: object
) -> tuple[Comparison, ...]:
    return judged(m, baseline, settings, **kw).comparisons  # type: ignore[arg-type]


def time_of(comparisons: Sequence[Comparison]) -> Comparison:
    return next(c for c in comparisons if c.kind is Kind.TIME)


def rules_that_acted(c: Comparison) -> list[str]:
    return [step.rule for step in c.explanation]
