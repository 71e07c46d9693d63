"""Each mode's ordered rule lists: the only place where the modes' verdicts differ, besides their evidence."""

from __future__ import annotations

from dataclasses import dataclass, fields

from pytest_gpuperf.modes import ModePlan
from pytest_gpuperf.verdict.pipeline import Rule
from pytest_gpuperf.verdict.rules import (
    AgainstThreshold,
    ConfirmOnly,
    Contention,
    Health,
    MemoryGrowth,
    MetricBounds,
    MetricTolerance,
    MinimumSamples,
    NoiseFloor,
    NoisyBaseline,
    Reference,
    Screen,
    Significance,
)


@dataclass(frozen=True)
class RuleSet:
    """The rules for each kind of comparison, and for judging a confirmation's readings."""

    time: tuple[Rule, ...]
    memory: tuple[Rule, ...]
    metric: tuple[Rule, ...]
    confirmation: tuple[Rule, ...]

    def names(self) -> dict[str, tuple[str, ...]]:
        """Rule names per list, for ``--gpuperf-explain`` and the docs."""
        return {f.name: tuple(r.name for r in getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class GuardRules:
    """What a host guard adds: rules after significance (time) and after the tolerance (metrics)."""

    time: tuple[Rule, ...] = ()
    metric: tuple[Rule, ...] = ()


def baseline_rules(guard: GuardRules = GuardRules()) -> RuleSet:
    """Against a stored baseline: its recorded noise raises the threshold; the host guard judges the host."""
    return RuleSet(
        time=(
            MinimumSamples(),
            Reference(),
            NoiseFloor(),
            Significance(),
            Contention(),
            NoisyBaseline(),
            *guard.time,
            Health(),
        ),
        memory=(Reference(), MemoryGrowth()),
        metric=(MetricBounds(), Reference(), MetricTolerance(), *guard.metric),
        confirmation=(
            MinimumSamples(),
            Reference(),
            NoiseFloor(),
            Significance(suspects=False),
            Contention(),
            NoisyBaseline(),
            *guard.time,
            Health(),
        ),
    )


def compare_ref_rules(guard: GuardRules = GuardRules()) -> RuleSet:
    """Head and base interleaved in one run: no recorded noise, no frozen number to distrust. The interval
    decides against the threshold in three outcomes; the first pair screens what fresh pairs decide. The host
    guard adds only what each side records of its own host (a GPU's clocks: the CPU guard adds nothing here)."""
    return RuleSet(
        time=(
            MinimumSamples(),
            Reference(),
            AgainstThreshold(),
            Screen(),
            Contention(three_outcomes=True),
            *guard.time,
            Health(),
        ),
        memory=(Reference(), MemoryGrowth()),
        metric=(MetricBounds(), Reference(), MetricTolerance()),
        confirmation=(AgainstThreshold(), ConfirmOnly(), Health()),
    )


def rules_for(plan: ModePlan, guard: GuardRules = GuardRules()) -> RuleSet:
    """The rule lists of ``plan``'s mode with the host guard's rules in place."""
    return compare_ref_rules(guard) if plan.interleaved else baseline_rules(guard)
