"""Fixed rounds and per-round setup in the runner: ``benchmark.pedantic``'s plan (issue 22)."""

from __future__ import annotations

import dataclasses
import time

import torch

from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.measure.runner import MeasureSpec, Runner, RunnerOptions, stopping_rule
from pytest_gpuperf.measure.timers import CPU_MIN_SAMPLE_NS

FIXED = MeasureSettings(warmup_time_s=0.01, min_time_s=0.03, max_time_s=0.3, target_precision=0.05, rounds=7)


def _runner() -> Runner:
    return Runner(RunnerOptions(device=torch.device("cpu"), nvtx=False))


def test_fixed_rounds_take_exactly_that_many_samples_of_the_given_block() -> None:
    slow = _runner().measure(MeasureSpec(fn=lambda: time.sleep(0.0002), settings=FIXED, calls_per_sample=3))
    assert slow.stats.count == 7
    assert slow.calls_per_sample == 3
    assert slow.total_calls == 21


def test_fixed_iterations_too_short_for_the_timer_are_timed_in_blocks_of_whole_iterations() -> None:
    m = _runner().measure(MeasureSpec(fn=lambda: sum(range(50)), settings=FIXED, calls_per_sample=3))
    assert m.stats.count == 7  # the rounds asked for, each a block of whole iterations
    assert m.calls_per_sample % 3 == 0 and m.calls_per_sample * m.stats.median_ns >= 0.5 * CPU_MIN_SAMPLE_NS
    assert m.total_calls == 7 * m.calls_per_sample
    assert any(n.text.startswith(f"timed in blocks of {m.calls_per_sample} calls") for n in m.notes)


def test_before_block_runs_outside_every_block_with_its_fresh_arguments() -> None:
    made: list[list[int]] = []

    def before() -> None:
        made.append(list(range(200, 0, -1)))

    def call() -> None:
        values = made[-1]
        assert values[0] == 200, "a block reused another block's arguments"
        values.sort()

    m = _runner().measure(MeasureSpec(fn=call, settings=FIXED, calls_per_sample=1, before_block=before))
    assert m.stats.count == 7
    assert len(made) == m.warmup_calls + m.total_calls + 1  # the warm-up's blocks, the samples, the memory probe


def test_stopping_rule_of_fixed_rounds_bounds_both_ends() -> None:
    rule = stopping_rule(FIXED)
    assert (rule.min_samples, rule.max_samples) == (7, 7)
    adaptive = stopping_rule(dataclasses.replace(FIXED, rounds=None))
    assert adaptive.min_samples == FIXED.min_samples and adaptive.max_samples != 7
