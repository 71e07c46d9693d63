"""torch.compile: compile cost, steady-state speedup, graph breaks and recompilations.

The first call is ``first_call_cached_s`` when every graph came from inductor's FX
graph cache, else ``first_call_s``: a cold compile takes several times as long, so
the two are never compared. Graph breaks and recompiles come from dynamo's records
and are gated with ``absolute_tolerance=0``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch._dynamo
from torch._dynamo.utils import clear_compilation_metrics, counters, get_compilation_metrics

from pytest_gpuperf.model import Measurement
from pytest_gpuperf.paths import Bench
from pytest_gpuperf.paths._torch import elapsed_ns, record_speedup


@dataclass(frozen=True)
class DynamoCounts:
    """What dynamo recorded since the last :func:`reset_dynamo`."""

    graph_breaks: int
    graph_break_reasons: tuple[str, ...]
    recompiles: int
    recompile_reasons: tuple[str, ...]


CacheState = Literal["hit", "miss", "none"]


def fx_graph_cache_state() -> CacheState:
    """How inductor's FX graph cache served the compilations since :func:`reset_dynamo`.

    "hit": every graph from the cache; "miss": at least one compiled; "none": no inductor compilation.
    """
    inductor = counters["inductor"]
    if inductor["fxgraph_cache_miss"] + inductor["fxgraph_cache_bypass"]:
        return "miss"
    return "hit" if inductor["fxgraph_cache_hit"] else "none"


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
    )


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
    """Compile ``fn`` and measure it as ``<name>.steady`` against eager ``<name>.eager`` on ``bench.device``.

    ``extra_inputs``: further argument tuples called once each after the first call
    (shape changes that may recompile). ``first_call_tolerance`` is loose: compile
    time varies with the disk and the compiler more than steady-state time does.
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
    how = f"torch.compile(backend={backend!r}, mode={mode!r}, dynamic={dynamic!r})"
    speedup = record_speedup(
        bench, eager, steady, tolerance=speedup_tolerance, minimum=min_speedup, how=f"eager median / {how} median"
    )
    for metric, count, maximum, reasons, what in (
        ("graph_breaks", first.graph_breaks, max_graph_breaks, first.graph_break_reasons, "graph breaks"),
        ("recompiles", counts.recompiles, max_recompiles, counts.recompile_reasons, "recompilations"),
    ):  # counts: any increase fails
        bench.metric(
            metric,
            count,
            better="lower",
            tolerance=None,
            absolute_tolerance=0,
            maximum=maximum,
            measurement=steady.name,
            description=f"dynamo {what} under {how}{_summary(reasons)}",
        )
    served = {"hit": ", served from inductor's FX graph cache", "miss": ", compiled from scratch"}.get(cache_state, "")
    bench.metric(
        "first_call_cached_s" if cache_state == "hit" else "first_call_s",
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
