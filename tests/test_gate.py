from __future__ import annotations

import dataclasses

from pytest_gpuperf.compare import GateSettings
from pytest_gpuperf.gate import evaluate, fails, failure_message, format_value
from pytest_gpuperf.model import MeasurementResult, Verdict
from tests.test_compare import ENV, OTHER, entry, measurement

S = GateSettings()


class Remeasurer:
    def __init__(self, *medians: float) -> None:
        self.medians = list(medians)
        self.calls = 0

    def __call__(self):  # type: ignore[no-untyped-def]
        self.calls += 1
        return measurement(self.medians.pop(0))


def test_confirmed_regression_stays_a_regression() -> None:
    again = Remeasurer(1480.0)
    result = evaluate(measurement(1500.0), entry(1000.0), ENV, S, remeasure=again)
    assert again.calls == 1
    assert result.verdict is Verdict.REGRESSION and fails(result, S)
    assert "confirmed by 1 re-measure" in result.comparisons[0].note
    assert result.measurement.stats.median_ns < 1490  # the fresh measurement is reported


def test_unconfirmed_regression_is_dropped() -> None:
    again = Remeasurer(1005.0)
    result = evaluate(measurement(1500.0), entry(1000.0), ENV, S, remeasure=again)
    assert result.verdict is Verdict.UNCHANGED and not fails(result, S)
    assert "not confirmed" in result.comparisons[0].note and "+50.0%" in result.comparisons[0].note


def test_every_remeasure_must_confirm() -> None:
    again = Remeasurer(1500.0, 1000.0, 1500.0)
    result = evaluate(measurement(1500.0), entry(1000.0), ENV, S, remeasure=again, max_remeasures=3)
    assert again.calls == 2 and result.verdict is Verdict.UNCHANGED


def test_no_remeasure_without_suspicion_or_when_disabled() -> None:
    again = Remeasurer(1500.0)
    assert evaluate(measurement(1000.0), entry(1000.0), ENV, S, remeasure=again).verdict is Verdict.UNCHANGED
    assert evaluate(measurement(1500.0), entry(1000.0), ENV, S, remeasure=again, max_remeasures=0).verdict \
        is Verdict.REGRESSION  # fmt: skip
    assert again.calls == 0


def test_a_regression_the_machine_explains_is_unstable() -> None:
    """The re-measure's speed probe read the machine 1.6x slower than the baseline's: not judged."""
    slow = Remeasurer(1550.0)
    slow_machine = lambda: dataclasses.replace(slow(), speed_probe_ns=48_000.0)  # noqa: E731
    result = evaluate(measurement(1500.0), entry(1000.0, speed_probe_ns=30_000.0), ENV, S, remeasure=slow_machine)
    assert result.verdict is Verdict.UNSTABLE and not fails(result, S)
    assert fails(result, GateSettings(strict=True))
    assert "machine ran x1.60 slower" in result.comparisons[0].note and "+55.0%" in result.comparisons[0].note


def test_a_regression_on_a_machine_at_baseline_speed_still_fails() -> None:
    normal = Remeasurer(1550.0)
    normal_machine = lambda: dataclasses.replace(normal(), speed_probe_ns=36_000.0)  # noqa: E731  x1.20: in range
    result = evaluate(measurement(1500.0), entry(1000.0, speed_probe_ns=30_000.0), ENV, S, remeasure=normal_machine)
    assert result.verdict is Verdict.REGRESSION and fails(result, S)
    # a baseline without a probe (written before probes existed) gives no speed to compare with
    unknown = Remeasurer(1550.0)
    slow_machine = lambda: dataclasses.replace(unknown(), speed_probe_ns=90_000.0)  # noqa: E731
    assert evaluate(measurement(1500.0), entry(1000.0), ENV, S, remeasure=slow_machine).verdict is Verdict.REGRESSION


def test_a_baseline_written_on_a_slower_machine_is_not_trusted() -> None:
    base = entry(1000.0, speed_probe_ns=45_000.0)
    result = evaluate(measurement(1000.0, speed_probe_ns=30_000.0), base, ENV, S)
    assert result.verdict is Verdict.UNSTABLE and not fails(result, S)
    assert "baseline was written while the machine ran x1.50 slower" in result.comparisons[0].note
    # within the range of one process's probe against another's: judged as usual
    assert evaluate(measurement(1000.0, speed_probe_ns=40_000.0), base, ENV, S).verdict is Verdict.UNCHANGED


def test_strict_fails_not_comparable() -> None:
    result = evaluate(measurement(), entry(env=OTHER), ENV, S)
    assert result.verdict is Verdict.NOT_COMPARABLE
    assert not fails(result, S) and fails(result, GateSettings(strict=True))
    assert "not comparable" in failure_message(result, "cpu")


def test_failure_message_names_everything() -> None:
    result: MeasurementResult = evaluate(measurement(1500.0), entry(1000.0), ENV, S)
    text = failure_message(result, "cpu")
    assert "t.py::test_a::default" in text
    assert "time.p50: 999.2 ns -> 1.499 us (+50.0%)" in text
    assert "evidence: ratio 1.5" in text and "threshold: 10.0%" in text
    assert "device: cpu" in text and "baseline commit: abc123" in text


def test_format_value() -> None:
    assert format_value(1_500_000.0, "ns") == "1.5 ms"
    assert format_value(3 * (1 << 20), "B") == "3 MiB"
    assert format_value(2.0, "x") == "2 x"
    assert format_value(None, "ns") == "n/a"
