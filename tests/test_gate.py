from __future__ import annotations

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
