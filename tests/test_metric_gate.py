"""A gated metric's failure names the baseline value and what the metric is about."""

from __future__ import annotations

from pytest_gpuperf.baseline import entry_from_measurement
from pytest_gpuperf.compare import GateSettings, compare_to_baseline
from pytest_gpuperf.gate import evaluate, failure_message
from pytest_gpuperf.model import Environment, Measurement, Metric, Provenance, Verdict

ENV = Environment(device_class="cpu-test", device_type="cpu", device_name="test cpu", cpu_model="test cpu",
                  python="3.11")


def _measurement(graph_breaks: float) -> Measurement:
    metric = Metric("graph_breaks", graph_breaks, better="lower", tolerance=None, absolute_tolerance=0,
                    maximum=0, description="dynamo graph breaks: Call to `print`")
    return Measurement(test_id="t.py::test_c", name="compile.steady", samples_ns=tuple(1000.0 + i for i in range(50)),
                       calls_per_sample=1, device="cpu", timer="perf_counter", metrics=(metric,),
                       round_medians_ns=(1025.0,) * 4)


def test_bound_violation_reports_baseline_and_description() -> None:
    baseline = entry_from_measurement(_measurement(0), ENV, Provenance(commit="abc123def456"), noise=None,
                                      recorded_at=None)
    comparisons = compare_to_baseline(_measurement(1), baseline, ENV, GateSettings())
    (metric,) = [c for c in comparisons if c.metric == "metric.graph_breaks"]
    assert metric.verdict is Verdict.REGRESSION
    assert metric.baseline == 0 and metric.current == 1
    assert metric.note == "dynamo graph breaks: Call to `print`"
    message = failure_message(evaluate(_measurement(1), baseline, ENV, GateSettings()), "cpu")
    assert "metric.graph_breaks: 0 -> 1" in message
    assert "Call to `print`" in message
    assert "abc123def456" in message
