from __future__ import annotations

import pytest
import torch

from pytest_gpuperf.model import Measurement
from pytest_gpuperf.paths import ddp
from pytest_gpuperf.paths.standalone import StandaloneBench


def test_measure_counts_calls_and_keeps_throughput() -> None:
    calls = []
    bench = StandaloneBench(calls=3, warmup=2, test_id="t")
    m = bench.measure(lambda v: calls.append(v), (1,), name="x", items=8, flops=16)
    assert len(calls) == 5 and len(m.samples_ns) == 3 and m.total_calls == 5
    assert (m.test_id, m.name, m.throughput.items, m.throughput.flops) == ("t", "x", 8, 16)
    assert all(s > 0 for s in m.samples_ns)


def test_metrics_attach_to_the_latest_or_the_named_measurement() -> None:
    bench = StandaloneBench(calls=1, warmup=0)
    bench.measure(torch.zeros, (4,), name="a")
    bench.measure(torch.zeros, (4,), name="b")
    bench.metric("speedup", 2.0)
    bench.metric("graph_breaks", 0, better="lower", tolerance=None, absolute_tolerance=0, measurement="a")
    bench.metric("speedup", 3.0)  # replaces, does not duplicate
    b_metrics = bench.measurements["b"].metrics
    assert [(x.name, x.value) for x in b_metrics] == [("speedup", 3.0)]
    a_metric = bench.measurements["a"].metric("graph_breaks")
    assert a_metric is not None and a_metric.absolute_tolerance == 0


def test_a_metric_that_is_not_finite_is_refused_naming_it() -> None:
    bench = StandaloneBench(calls=1, warmup=0)
    bench.measure(torch.zeros, (1,), name="a")
    with pytest.raises(ValueError, match=r"metric 'acc': value=nan is not a finite number"):
        bench.metric("acc", float("nan"))
    with pytest.raises(ValueError, match=r"metric 'acc': maximum=inf is not a finite number"):
        bench.metric("acc", 0.9, maximum=float("inf"))
    assert bench.measurements["a"].metrics == ()


def test_mistakes_are_named() -> None:
    bench = StandaloneBench(calls=1, warmup=0)
    with pytest.raises(ValueError, match="no measurement taken yet"):
        bench.metric("m", 1.0)
    bench.measure(torch.zeros, (1,), name="a")
    with pytest.raises(ValueError, match="'a' measured twice"):
        bench.measure(torch.zeros, (1,), name="a")
    with pytest.raises(KeyError, match="no measurement named 'zz'"):
        bench.metric("m", 1.0, measurement="zz")
    other = Measurement(
        test_id="elsewhere", name="r", samples_ns=(1.0,), calls_per_sample=1, device="cpu", timer="perf_counter"
    )
    assert bench.record(other).test_id == "standalone"
    with pytest.raises(ValueError, match="'r' recorded twice"):
        bench.record(other)
    with pytest.raises(ValueError, match="calls must be >= 1"):
        StandaloneBench(calls=0)


def test_cpu_ranks_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(ddp.os, "cpu_count", lambda: 8)
    assert ddp._cpu_threads(torch.device("cpu"), 2) == 4
    assert ddp._cpu_threads(torch.device("cpu"), 16) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert ddp._cpu_threads(torch.device("cpu"), 2) == 0  # the user's setting wins


def test_ddp_steps_are_split_into_rounds_for_the_noise_estimate() -> None:
    assert ddp._round_medians([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], 4) == (1.5, 3.5, 5.5, 7.5)
    assert ddp._round_medians([1.0, 2.0, 3.0], 4) == ()  # too few steps: no estimate rather than a bad one
    assert ddp._round_medians([1.0] * 8, 2) == ()  # the gate needs at least 3 rounds
