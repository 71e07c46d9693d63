"""The CUDA host guard (measure/host/cuda.py): its sm-clock rule through the real rule lists of every mode, its
device sampler, and the rules a recorded CUDA measurement is judged by."""

from __future__ import annotations

import pytest
import torch
from verdict_helpers import ENV, S, entry, measurement, rules_that_acted, time_of

from pytest_gpuperf.config import Mode
from pytest_gpuperf.gpu.device_state import DeviceSampler
from pytest_gpuperf.measure.host import device_sampler, guard_for, recorded_rules
from pytest_gpuperf.measure.host.cuda import CLOCK_TOLERANCE, CudaHostGuard, SmClock, cuda_rules
from pytest_gpuperf.model import Comparison, DeviceState, DeviceSummary, Kind, Measurement, Verdict
from pytest_gpuperf.modes import plan_for
from pytest_gpuperf.verdict import Reference, judge
from pytest_gpuperf.verdict.case import Case
from pytest_gpuperf.verdict.rulesets import RuleSet, rules_for
from tests.nvml_fake import FakeNvml


def cuda_rule_set(mode: Mode = Mode.BASELINE) -> RuleSet:
    plan = plan_for(mode)
    return rules_for(plan, CudaHostGuard(torch.device("cpu"), nvml=FakeNvml()).rules(plan))


def at_clock(median: float, mhz: float | None) -> Measurement:
    """A measurement whose samples ran at an SM clock of ``mhz`` (None: NVML read none)."""
    state = DeviceState(summary=DeviceSummary(sm_clock_mhz=mhz))
    return measurement(median, device_state=state)


def judge_time(m: Measurement, base_mhz: float | None, base_median: float = 1000.0, *, mode: Mode = Mode.BASELINE,
               base_ref: str | None = None) -> Comparison:  # fmt: skip
    reference = Reference(entry=entry(base_median, device_state=DeviceSummary(sm_clock_mhz=base_mhz)),
                          base_ref=base_ref)  # fmt: skip
    return time_of(judge(m, reference, S, cuda_rule_set(mode), ENV).comparisons)


def test_a_regression_the_lower_clock_explains_is_the_cards_not_the_codes() -> None:
    # 12% lower clock: clock-bound work up to 1980/1742 - 1 = +13.7% slower; +12% measured
    c = judge_time(at_clock(1120.0, 1742.0), 1980.0)
    assert c.verdict is Verdict.UNSTABLE
    assert "the SM clock was 12% lower in this run than in the baseline (1742 vs 1980 MHz, NVML): a slower card " \
           "or a power cap, not slower code" in c.note  # fmt: skip
    assert "can explain up to +13.7%" in c.note
    assert "sm-clock" in rules_that_acted(c)


def test_a_regression_beyond_what_the_clock_explains_stands_with_the_clocks_share() -> None:
    c = judge_time(at_clock(1500.0, 1742.0), 1980.0)
    assert c.verdict is Verdict.REGRESSION
    assert "which explains up to +13.7%: +50.0% is more than the clock" in c.note


def test_an_improvement_against_a_baseline_at_a_lower_clock_is_the_cards_too() -> None:
    c = judge_time(at_clock(880.0, 1980.0), 1742.0)
    assert c.verdict is Verdict.UNSTABLE
    assert "12% lower in the baseline than in this run" in c.note


def test_clocks_within_the_tolerance_or_unread_say_nothing() -> None:
    close = 1980.0 * (1 - CLOCK_TOLERANCE / 2)
    for m, base in ((at_clock(1300.0, close), 1980.0), (at_clock(1300.0, None), 1980.0), (at_clock(1300.0, 1742.0),
                    None), (measurement(1300.0), 1980.0)):  # fmt: skip
        c = judge_time(m, base)
        assert c.verdict is Verdict.REGRESSION and "sm-clock" not in rules_that_acted(c)


def test_a_higher_clock_beside_a_regression_is_no_excuse() -> None:
    c = judge_time(at_clock(1300.0, 1980.0), 1742.0)
    assert c.verdict is Verdict.REGRESSION and "sm-clock" not in rules_that_acted(c)


def test_compare_ref_names_the_head_and_the_base_ref() -> None:
    c = judge_time(at_clock(1120.0, 1742.0), 1980.0, mode=Mode.COMPARE_REF, base_ref="main")
    assert c.verdict is Verdict.UNSTABLE and "12% lower at head than at main" in c.note


def test_every_mode_and_a_recorded_cuda_measurement_judge_with_the_rule() -> None:
    for mode in (Mode.BASELINE, Mode.COMPARE_REF):
        plan = plan_for(mode)
        rules = rules_for(plan, cuda_rules(plan))
        assert "sm-clock" in [r.name for r in rules.time]
        assert [r.name for r in recorded_rules("cuda", plan=plan).time] == ["sm-clock"]
    assert "sm-clock" in [r.name for r in cuda_rule_set().confirmation]


def test_the_cpu_guards_compare_ref_lists_are_unchanged() -> None:
    plan = plan_for(Mode.COMPARE_REF)
    cpu = guard_for(torch.device("cpu"), plan=plan, pin_cpu="off")
    assert [r.name for r in rules_for(plan, cpu.rules(plan)).time] == [
        "minimum-samples", "reference", "against-threshold", "screen", "contention", "health",
    ]  # fmt: skip


def test_only_the_cuda_guard_reads_the_device() -> None:
    cpu = torch.device("cpu")
    assert device_sampler(guard_for(cpu, plan=plan_for(Mode.BASELINE), pin_cpu="off")) is None
    assert isinstance(device_sampler(CudaHostGuard(cpu, nvml=FakeNvml())), DeviceSampler)


def _case_and_draft(verdict: Verdict) -> tuple[Case, Comparison]:
    case = Case(Kind.TIME, "time.p50", 1.0, "ns", at_clock(1.0, 1000.0), entry(device_state=DeviceSummary(2000.0)),
                S, ENV)  # fmt: skip
    return case, Comparison(key="k", metric="time.p50", verdict=verdict, current=1.0)


def test_the_rule_needs_evidence() -> None:
    assert SmClock().apply(*_case_and_draft(Verdict.REGRESSION)) is None


@pytest.mark.parametrize("verdict", [Verdict.UNCHANGED, Verdict.NEW, Verdict.UNSTABLE, Verdict.NOT_GATED])
def test_a_time_no_rule_called_changed_is_left_alone(verdict: Verdict) -> None:
    assert SmClock().apply(*_case_and_draft(verdict)) is None
