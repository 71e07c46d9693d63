from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch._dynamo

from pytest_gpuperf.paths.compile import compare_compile, dynamo_counts, fx_graph_cache_state, reset_dynamo
from pytest_gpuperf.paths.standalone import StandaloneBench

# "eager" runs dynamo's tracing, guards and graph breaks without inductor's code
# generation, so the counts are real and the tests stay fast.
BACKEND = "eager"


def clean(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x.sin() * 2)


def explicit_break(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos()


def item_break(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    if y.sum().item() > 0:  # data-dependent Python control flow: dynamo must leave the graph
        return y.cos()
    return -y


@pytest.fixture
def bench() -> StandaloneBench:
    return StandaloneBench(calls=2, warmup=0)


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> object:
    yield
    reset_dynamo()


def test_clean_function_has_no_graph_breaks(bench: StandaloneBench) -> None:
    report = compare_compile(bench, clean, (torch.randn(16),), backend=BACKEND, max_graph_breaks=0)
    assert (report.graph_breaks, report.recompiles) == (0, 0)
    assert set(bench.measurements) == {"compile.eager", "compile.steady"}
    steady = bench.measurements["compile.steady"]
    breaks = steady.metric("graph_breaks")
    assert breaks is not None and breaks.value == 0
    assert (breaks.absolute_tolerance, breaks.tolerance, breaks.maximum, breaks.better) == (0, None, 0, "lower")
    assert {m.name for m in steady.metrics} == {"speedup", "graph_breaks", "recompiles", "first_call_s"}
    first = steady.metric("first_call_s")
    assert first is not None and first.value > 0


def test_explicit_graph_break_is_counted_with_its_reason(bench: StandaloneBench) -> None:
    report = compare_compile(bench, explicit_break, (torch.randn(16),), backend=BACKEND)
    assert report.graph_breaks == 1
    assert any("graph_break()" in r for r in report.graph_break_reasons)
    metric = bench.measurements["compile.steady"].metric("graph_breaks")
    assert metric is not None and metric.value == 1 and "graph_break()" in metric.description


def test_item_call_is_a_graph_break(bench: StandaloneBench) -> None:
    report = compare_compile(bench, item_break, (torch.randn(16),), backend=BACKEND)
    assert report.graph_breaks == 1
    assert any("item()" in r for r in report.graph_break_reasons)


def test_shape_change_recompiles_and_names_the_guard(bench: StandaloneBench) -> None:
    report = compare_compile(
        bench,
        clean,
        (torch.randn(16),),
        backend=BACKEND,
        extra_inputs=[(torch.randn(4, 4),)],
        max_recompiles=0,
    )
    assert report.recompiles == 1
    assert "mismatch" in report.recompile_reasons[0]
    metric = bench.measurements["compile.steady"].metric("recompiles")
    assert metric is not None and metric.value == 1 and metric.maximum == 0


def test_dynamic_shapes_avoid_the_recompile(bench: StandaloneBench) -> None:
    report = compare_compile(
        bench, clean, (torch.randn(16),), backend=BACKEND, dynamic=True, extra_inputs=[(torch.randn(9),)]
    )
    assert report.recompiles == 0


def test_counts_start_from_zero_for_each_measurement(bench: StandaloneBench) -> None:
    compare_compile(bench, explicit_break, (torch.randn(16),), backend=BACKEND, name="first")
    report = compare_compile(bench, clean, (torch.randn(16),), backend=BACKEND, name="second")
    assert report.graph_breaks == 0
    assert dynamo_counts().graph_breaks == 0


def test_backend_and_mode_are_recorded(bench: StandaloneBench) -> None:
    report = compare_compile(
        bench, torch.nn.Linear(8, 8), (torch.randn(2, 8),), backend="aot_eager", mode=None, name="lin"
    )
    assert report.backend == "aot_eager"
    for metric in bench.measurements["lin.steady"].metrics:
        assert "backend='aot_eager', mode=None" in metric.description


def test_fullgraph_refuses_a_graph_break(bench: StandaloneBench) -> None:
    with pytest.raises(torch._dynamo.exc.Unsupported, match="graph_break"):
        compare_compile(bench, explicit_break, (torch.randn(16),), backend=BACKEND, fullgraph=True)


def test_no_inductor_compilation_means_no_cache_state(bench: StandaloneBench) -> None:
    report = compare_compile(bench, clean, (torch.randn(16),), backend=BACKEND)
    assert report.fx_graph_cache == "none"
    assert bench.measurements["compile.steady"].metric("first_call_s") is not None


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # inductor's import
def test_first_call_is_named_by_how_the_fx_graph_cache_served_it(
    bench: StandaloneBench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # inductor for real, into an empty cache folder: the first compile misses, the same graph then hits
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config, "fx_graph_cache", True)
    x = torch.randn(8)
    cold = compare_compile(bench, clean, (x,), backend="inductor", name="cold")
    warm = compare_compile(bench, clean, (x,), backend="inductor", name="warm")
    assert (cold.fx_graph_cache, warm.fx_graph_cache) == ("miss", "hit")
    cold_names = {m.name for m in bench.measurements["cold.steady"].metrics}
    warm_names = {m.name for m in bench.measurements["warm.steady"].metrics}
    assert "first_call_s" in cold_names and "first_call_cached_s" not in cold_names
    assert "first_call_cached_s" in warm_names and "first_call_s" not in warm_names
    cached = bench.measurements["warm.steady"].metric("first_call_cached_s")
    assert cached is not None and "served from inductor's FX graph cache" in cached.description


def test_cache_state_counts_only_since_the_reset() -> None:
    reset_dynamo()
    assert fx_graph_cache_state() == "none"
