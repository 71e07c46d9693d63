"""torch.compile: compile cost, steady-state speedup, graph breaks and recompilations.

:func:`compare_compile` resets dynamo, compiles ``fn``, times the first call on
its own (tracing and code generation), feeds the ``extra_inputs`` the workload
also sees (shape changes that may recompile), then measures eager as
``<name>.eager`` and the compiled function as ``<name>.steady``.

The first call's time is named by how inductor's FX graph cache served it:
``first_call_s`` when any graph was compiled from scratch (or the cache was
off), ``first_call_cached_s`` when every graph came from the cache. A cold
compile can take several times as long as a cached one, so a fresh runner (or a
cleared ``TORCHINDUCTOR_CACHE_DIR``) against a baseline written with a warm cache
would read a "regression" that is no change of the code; each name is compared
only with its own kind.

The counts come from dynamo's own records, not from timing:

- ``graph_breaks``: ``torch._dynamo.utils.counters["graph_break"]`` after the first call;
- ``recompiles``: compilations dynamo logged with a recompile reason
  (``torch._dynamo.utils.get_compilation_metrics()``), over the whole test.

Both are gated with ``absolute_tolerance=0``: one more graph break or recompile
than the baseline fails even when the time holds. ``max_graph_breaks`` /
``max_recompiles`` add hard bounds that fail without a baseline. Every metric's
description names the backend and mode, so a report says what was compiled how.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch._dynamo
from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics

from pytest_gpuperf.model import Measurement
from pytest_gpuperf.paths import Bench
from pytest_gpuperf.paths._torch import elapsed_ns


@dataclass(frozen=True)
class DynamoCounts:
    """What dynamo recorded since the last :func:`reset_dynamo`."""

    graph_breaks: int
    graph_break_reasons: tuple[str, ...]
    recompiles: int
    recompile_reasons: tuple[str, ...]
    unique_graphs: int


CacheState = Literal["hit", "miss", "none"]


def fx_graph_cache_state() -> CacheState:
    """How inductor's FX graph cache served the compilations since :func:`reset_dynamo`.

    "hit": every graph came from the cache; "miss": at least one was compiled
    (a miss or a bypass); "none": no inductor compilation was counted (another
    backend, or nothing compiled yet).
    """
    inductor = counters["inductor"]
    hits = inductor["fxgraph_cache_hit"]
    compiled = inductor["fxgraph_cache_miss"] + inductor["fxgraph_cache_bypass"]
    if compiled:
        return "miss"
    return "hit" if hits else "none"


def first_call_metric_name(cache_state: CacheState) -> str:
    """The first call's metric name for a cache state (see the module doc)."""
    return "first_call_cached_s" if cache_state == "hit" else "first_call_s"


@dataclass(frozen=True)
class CompileReport:
    """What :func:`compare_compile` measured."""

    backend: str
    mode: str | None
    first_call_s: float
    fx_graph_cache: CacheState  # how the first call was served (fx_graph_cache_state)
    eager: Measurement
    steady: Measurement
    speedup: float
    graph_breaks: int
    recompiles: int
    graph_break_reasons: tuple[str, ...]
    recompile_reasons: tuple[str, ...]
    compiled: Callable[..., Any]


def reset_dynamo() -> None:
    """Forget compiled code, guards and counters, so the next counts belong to one measurement."""
    torch._dynamo.reset()
    counters.clear()
    clear_compilation_metrics()


def _first_line(reason: str) -> str:
    return reason.strip().splitlines()[0] if reason.strip() else reason


def dynamo_counts() -> DynamoCounts:
    """Read dynamo's counters: graph breaks (with their reasons), recompilations, graphs."""
    breaks = counters["graph_break"]
    recompiles = [m.recompile_reason for m in get_compilation_metrics() if m.recompile_reason]
    return DynamoCounts(
        graph_breaks=int(sum(breaks.values())),
        graph_break_reasons=tuple(_first_line(r) for r in breaks),
        recompiles=len(recompiles),
        recompile_reasons=tuple(_first_line(r) for r in recompiles),
        unique_graphs=int(counters["stats"]["unique_graphs"]),
    )


def _describe(backend: str, mode: str | None, dynamic: bool | None) -> str:
    return f"torch.compile(backend={backend!r}, mode={mode!r}, dynamic={dynamic!r})"


def _summary(reasons: Sequence[str]) -> str:
    shown = "; ".join(reasons[:3])
    more = f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else ""
    return f": {shown}{more}" if shown else ""


def compare_compile(
    bench: Bench,
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    name: str = "compile",
    backend: str = "inductor",
    mode: str | None = None,
    dynamic: bool | None = None,
    fullgraph: bool = False,
    extra_inputs: Sequence[Sequence[Any]] = (),
    max_graph_breaks: int | None = None,
    max_recompiles: int | None = None,
    min_speedup: float | None = None,
    speedup_tolerance: float | None = 0.10,
    first_call_tolerance: float | None = 1.0,
    items: float | None = None,
    flops: float | None = None,
) -> CompileReport:
    """Compile ``fn`` with ``torch.compile`` and measure it against eager on ``bench.device``.

    ``fn`` is a function or module called as ``fn(*args, **kwargs)``;
    ``extra_inputs`` are further argument tuples called once each after the first
    call (with ``kwargs``). ``first_call_tolerance`` is loose by default: even
    like for like (see the module doc), compile time varies with the disk and
    the compiler more than steady-state time does.
    """
    kw = dict(kwargs or {})
    device = bench.device
    reset_dynamo()
    compiled = torch.compile(fn, backend=backend, mode=mode, dynamic=dynamic, fullgraph=fullgraph)
    first_call_s = elapsed_ns(lambda: compiled(*args, **kw), device) / 1e9
    first = dynamo_counts()
    cache_state = fx_graph_cache_state()
    for extra in extra_inputs:
        compiled(*extra, **kw)

    eager = bench.measure(fn, args, kw, name=f"{name}.eager", items=items, flops=flops)
    steady = bench.measure(compiled, args, kw, name=f"{name}.steady", items=items, flops=flops)
    counts = dynamo_counts()  # recompiles during the timed calls count too
    speedup = eager.stats.median_ns / steady.stats.median_ns if steady.stats.median_ns > 0 else math.inf

    how = _describe(backend, mode, dynamic)
    bench.metric(
        "speedup",
        speedup,
        unit="x",
        better="higher",
        tolerance=speedup_tolerance,
        minimum=min_speedup,
        measurement=steady.name,
        description=f"eager median / {how} median",
    )
    bench.metric(
        "graph_breaks",
        first.graph_breaks,
        better="lower",
        tolerance=None,
        absolute_tolerance=0,
        maximum=max_graph_breaks,
        measurement=steady.name,
        description=f"dynamo graph breaks under {how}{_summary(first.graph_break_reasons)}",
    )
    bench.metric(
        "recompiles",
        counts.recompiles,
        better="lower",
        tolerance=None,
        absolute_tolerance=0,
        maximum=max_recompiles,
        measurement=steady.name,
        description=f"dynamo recompilations under {how}{_summary(counts.recompile_reasons)}",
    )
    served = {"hit": ", served from inductor's FX graph cache", "miss": ", compiled from scratch"}.get(cache_state, "")
    bench.metric(
        first_call_metric_name(cache_state),
        first_call_s,
        unit="s",
        better="lower",
        tolerance=first_call_tolerance,
        measurement=steady.name,
        description=f"first call (compile) of {how}{served}",
    )
    return CompileReport(
        backend=backend,
        mode=mode,
        first_call_s=first_call_s,
        fx_graph_cache=cache_state,
        eager=eager,
        steady=steady,
        speedup=speedup,
        graph_breaks=first.graph_breaks,
        recompiles=counts.recompiles,
        graph_break_reasons=first.graph_break_reasons,
        recompile_reasons=counts.recompile_reasons,
        compiled=compiled,
    )
