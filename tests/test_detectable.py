"""The minimum detectable change (verdict/detectable.py): what each mode's evidence resolves, that it moves with
the noise, the readings it would take to resolve the threshold, and where more readings cannot."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from pytest_gpuperf.config import AutoThreshold, GateSettings, Mode
from pytest_gpuperf.model import Verdict
from pytest_gpuperf.verdict import Reference
from pytest_gpuperf.verdict.detectable import (
    FRESH_PAIRS,
    NOISE_LIMIT,
    POWER,
    SAMPLES,
    from_interval,
    from_noise,
    from_replicates,
)
from tests.verdict_helpers import ENV, cpu_rules, entry, judged, measurement, samples, time_of

Z = NormalDist().inv_cdf(0.975)
Z_POWER = NormalDist().inv_cdf(POWER)


def test_an_interval_resolves_the_alarm_and_power_quantiles_of_its_standard_error() -> None:
    found = from_interval(0.004, 16, 0.02, Z, "round pairs")
    assert found.change == pytest.approx(math.expm1((Z + Z_POWER) * 0.004))
    assert found.resolves and found.needed == 16  # already enough: the readings it had
    wide = from_interval(0.01, 16, 0.02, Z, "round pairs")
    assert not wide.resolves
    # a standard error shrinking as one over the root of the readings reaches the threshold at this many
    assert wide.needed == math.ceil(16 * ((Z + Z_POWER) * 0.01 / math.log1p(0.02)) ** 2)


def test_fresh_pairs_publish_more_the_more_they_spread_and_ask_for_more_pairs() -> None:
    quiet = from_replicates(0.005, 4, 0.02, 0.025, 12)
    noisy = from_replicates(0.02, 4, 0.02, 0.025, 12)
    assert quiet.reading == noisy.reading == FRESH_PAIRS
    assert quiet.change < noisy.change
    assert quiet.needed is not None and noisy.needed is not None and quiet.needed < noisy.needed
    assert quiet.resolves and not noisy.resolves


def test_baseline_modes_recorded_noise_is_a_limit_no_number_of_samples_removes() -> None:
    k = 3.0
    limited = from_noise(0.001, 300, 0.02, Z, 0.02, k)  # 3 x 2% of noise alone is past a 2% threshold
    assert limited.needed is None and limited.limit == NOISE_LIMIT and not limited.resolves
    sampling = from_noise(0.05, 100, 0.10, Z, 0.005, k)  # the samples' own error is what stands in the way
    assert sampling.reading == SAMPLES and not sampling.resolves
    assert sampling.needed is not None and sampling.needed > 100
    # that many samples, whose error shrinks as one over their root, resolve it
    assert from_noise(0.05 * math.sqrt(100 / sampling.needed), sampling.needed, 0.10, Z, 0.005, k).resolves


def test_the_published_value_moves_with_the_baselines_noise() -> None:
    m = measurement(1000.0)
    quiet = time_of(judged(m, entry(1000.0, noise=0.002)).comparisons).detectable
    noisy = time_of(judged(m, entry(1000.0, noise=0.04)).comparisons).detectable
    assert quiet is not None and noisy is not None
    assert quiet.change < noisy.change
    assert quiet.resolves and not noisy.resolves and noisy.needed is None  # 3 x 4% of noise: a quieter runner


def test_the_published_value_moves_with_the_samples_spread() -> None:
    steady = measurement(1000.0, samples_ns=samples(1000.0, rel_sd=0.01, seed=1))
    jumpy = measurement(1000.0, samples_ns=samples(1000.0, rel_sd=0.2, seed=1))
    reference = entry(1000.0, noise=0.0)
    low = time_of(judged(steady, reference).comparisons).detectable
    high = time_of(judged(jumpy, reference).comparisons).detectable
    assert low is not None and high is not None and low.change < high.change


def test_an_auto_threshold_is_what_the_test_resolves_within_its_bounds() -> None:
    m = measurement(1000.0)
    fixed = time_of(judged(m, entry(1000.0, noise=0.01)).comparisons)
    assert fixed.detectable is not None
    auto = GateSettings(auto_threshold=AutoThreshold(0.01, 0.5))
    chosen = time_of(judged(m, entry(1000.0, noise=0.01), auto).comparisons)
    assert chosen.threshold == pytest.approx(fixed.detectable.change)
    assert AutoThreshold(0.01, 0.5).pick(0.8) == 0.5  # what it resolves is past the high bound: the bound
    assert AutoThreshold(0.01, 0.5).pick(None) == 0.5  # nothing known: the cautious end
    floor = GateSettings(auto_threshold=AutoThreshold(0.2, 0.5))
    assert time_of(judged(m, entry(1000.0, noise=0.001), floor).comparisons).threshold == pytest.approx(0.2)


def test_an_auto_threshold_catches_what_the_fixed_default_lets_pass() -> None:
    # a 5% slowdown against a quiet baseline: below the 10% default, above what this test resolves
    m = measurement(1050.0)
    assert judged(m, entry(1000.0, noise=0.002)).verdict is Verdict.UNCHANGED
    auto = GateSettings(auto_threshold=AutoThreshold(0.01, 0.3))
    assert judged(m, entry(1000.0, noise=0.002), auto).verdict is Verdict.REGRESSION


def test_no_detectable_change_without_a_reference() -> None:
    result = judged(measurement(1000.0), None)
    assert time_of(result.comparisons).detectable is None


def test_compare_ref_rounds_publish_what_their_pair_of_processes_resolves() -> None:
    from pytest_gpuperf.verdict import evidence as ev

    head = [1000.0 * (1 + 0.002 * ((i % 3) - 1)) for i in range(16)]
    base = [1000.0] * 16
    gate = GateSettings(threshold=0.02)
    paired = ev.paired_rounds(head, base, gate, "main")
    reference = Reference(entry=entry(1000.0), time_evidence=paired, base_ref="main")
    from pytest_gpuperf.verdict import judge

    result = judge(measurement(1000.0), reference, gate, cpu_rules(Mode.COMPARE_REF), ENV)
    found = time_of(result.comparisons).detectable
    assert found is not None and found.reading == "round pairs" and found.readings == 16 and found.resolves
