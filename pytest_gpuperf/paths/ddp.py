"""Distributed data parallel: per-rank step times, all-reduce bandwidth, scaling.

Ranks start through torch's own launcher (as ``torchrun``), each building its step
with the user's *step factory* (a picklable callable or ``"module:function"``, given a
:class:`RankContext`); each sample is the slowest rank's step time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib
import os
import socket
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, record

from pytest_gpuperf import stats
from pytest_gpuperf.errors import DdpError, GpuperfError
from pytest_gpuperf.files import write_atomic
from pytest_gpuperf.model import Measurement, Note, Throughput
from pytest_gpuperf.paths import Bench
from pytest_gpuperf.paths._torch import elapsed_ns

StepFactory = Callable[["RankContext"], Callable[[], object]]

# Default all-reduce payload: bandwidth-bound on the device kind (256 MiB is on nccl-tests' plateau).
DEFAULT_ALLREDUCE_BYTES = {"cpu": 8 * 2**20, "cuda": 256 * 2**20}


@dataclass(frozen=True)
class RankContext:
    """What a step factory gets in each rank."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str


@dataclass(frozen=True)
class _RankSpec:
    """Everything a rank needs, pickled to the spawned process."""

    factory: str | StepFactory
    device_type: str
    backend: str
    steps: int
    warmup: int
    allreduce_bytes: int
    allreduce_iters: int
    timeout_s: float
    cpu_threads: int = 0  # torch threads per rank on CPU (0: leave as is)
    error_dir: str = ""  # where a failing rank notes its error, for the root cause


@dataclass(frozen=True)
class RankTimes:
    """One rank's per-step times and all-reduce times, in nanoseconds."""

    rank: int
    step_ns: tuple[float, ...]
    allreduce_ns: tuple[float, ...]
    hostname: str = ""


@dataclass(frozen=True)
class DdpReport:
    """What :func:`run_ddp` measured (``measurement`` is None on nodes without rank 0)."""

    world_size: int
    backend: str
    measurement: Measurement | None
    ranks: tuple[RankTimes, ...] = ()
    busbw_gbps: float | None = None
    algbw_gbps: float | None = None
    scaling_efficiency: float | None = None
    rank_imbalance: float | None = None
    one_rank: Measurement | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def resolve_factory(factory: str | StepFactory) -> StepFactory:
    """Turn ``"package.module:function"`` into the function; pass callables through."""
    if callable(factory):
        return factory
    module_name, sep, attr = factory.partition(":")
    if not sep or not module_name or not attr:
        raise DdpError("expected 'module:function'", factory=factory)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise DdpError(f"cannot import {module_name!r}: {exc}", factory=factory) from exc
    try:
        found = getattr(module, attr)
    except AttributeError:
        raise DdpError(f"module {module_name!r} has no {attr!r}", factory=factory) from None
    if not callable(found):
        raise DdpError(f"{attr!r} is not callable", factory=factory)
    return found


def bus_bandwidth(payload_bytes: float, seconds: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in bytes/s of one all-reduce, by the nccl-tests convention (busbw = algbw * 2(n-1)/n)."""
    if seconds <= 0:
        raise ValueError(f"all-reduce time must be positive, got {seconds}")
    algbw = payload_bytes / seconds
    return algbw, algbw * 2 * (world_size - 1) / world_size


@record  # a failing rank's traceback reaches ChildFailedError, hence the DdpError message
def _rank_main(spec: _RankSpec) -> list[RankTimes] | None:
    """The entry point of each rank (top-level so the spawn start method can pickle it)."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if spec.cpu_threads > 0:
        torch.set_num_threads(spec.cpu_threads)
    device = torch.device("cpu")
    if spec.device_type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    dist.init_process_group(spec.backend, timeout=datetime.timedelta(seconds=spec.timeout_s))
    try:
        return _run_rank(spec, local_rank, device)
    except BaseException as exc:
        if spec.error_dir:
            _note_error(spec.error_dir, exc)
        raise
    finally:
        dist.destroy_process_group()


def _note_error(error_dir: str, exc: BaseException) -> None:
    """Leave ``<time_ns> <rank> <error>`` behind: the earliest note is the root cause, whichever exits first."""
    rank = os.environ.get("RANK", "?")
    text = str(exc).strip()
    line = f"{time.time_ns()} {rank} {type(exc).__name__}: {text.splitlines()[0] if text else ''}"
    # On another node the launcher's folder does not exist: the launcher's own view remains.
    with contextlib.suppress(GpuperfError):
        write_atomic(Path(error_dir, f"rank{rank}.txt"), line)


def _run_rank(spec: _RankSpec, local_rank: int, device: torch.device) -> list[RankTimes] | None:
    """Build the step, time it, time the all-reduce, gather everything on rank 0."""
    rank, world = dist.get_rank(), dist.get_world_size()
    step = resolve_factory(spec.factory)(RankContext(rank, world, local_rank, device, spec.backend))
    for _ in range(spec.warmup):
        step()
    step_ns = []
    for _ in range(spec.steps):
        dist.barrier()  # every rank starts the step together: samples line up across ranks
        step_ns.append(elapsed_ns(step, device))
    allreduce_ns: list[float] = []
    if world > 1 and spec.allreduce_bytes > 0:
        payload = torch.ones(max(1, spec.allreduce_bytes // 4), dtype=torch.float32, device=device)
        dist.all_reduce(payload)  # warm-up: sets up the communicator
        for _ in range(spec.allreduce_iters):
            dist.barrier()
            allreduce_ns.append(elapsed_ns(lambda: dist.all_reduce(payload), device))
    mine = RankTimes(rank, tuple(step_ns), tuple(allreduce_ns), socket.gethostname())
    gathered: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(mine, gathered, dst=0)
    return [g for g in gathered if g is not None] if gathered is not None else None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on ``host`` (for the local rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _launch(spec: _RankSpec, nprocs: int, nnodes: int, rdzv_endpoint: str | None, name: str) -> list[RankTimes] | None:
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=nnodes,
        max_nodes=nnodes,
        nproc_per_node=nprocs,
        # Nodes of one multi-node run must agree on the id; a local run wants a fresh one.
        run_id=os.environ.get("GPUPERF_DDP_RUN_ID", f"gpuperf-{name}") if nnodes > 1 else uuid.uuid4().hex,
        rdzv_backend="c10d",
        rdzv_endpoint=rdzv_endpoint or f"127.0.0.1:{free_port()}",
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
    )
    with tempfile.TemporaryDirectory(prefix="gpuperf-ddp-") as error_dir:
        try:
            results = elastic_launch(config, _rank_main)(dataclasses.replace(spec, error_dir=error_dir))
        except ChildFailedError as exc:
            raise DdpError(_root_cause(error_dir, exc), measurement=name) from exc
    return next((r for r in results.values() if r is not None), None)


def _root_cause(error_dir: str, exc: ChildFailedError) -> str:
    """The earliest error a rank noted; else what the launcher saw."""
    notes = []
    for path in Path(error_dir).glob("rank*.txt"):
        stamp, rank, message = path.read_text(encoding="utf-8").split(" ", 2)
        notes.append((int(stamp), rank, message))
    if notes:
        notes.sort()
        _, rank, message = notes[0]
        others = ", ".join(f"rank {r}" for _, r, _ in notes[1:])
        then = f" (then {others} failed)" if others else ""
        return f"rank {rank} failed first: {message}{then}"
    failures = "; ".join(
        f"rank {r}: exit code {f.exitcode}: {_last_line(f.message)}" for r, f in sorted(exc.failures.items())
    )
    return f"a rank failed ({failures})"


def _last_line(message: object) -> str:
    if isinstance(message, dict):
        message = message.get("message", message)
    text = str(message).strip()
    return text.splitlines()[-1] if text else "no error message (see the rank's stderr above)"


def _round_medians(samples: list[float], rounds: int) -> tuple[float, ...]:
    """Medians of ``rounds`` consecutive blocks of steps for the noise estimate; empty when too few."""
    if rounds < 3 or len(samples) < 2 * rounds:
        return ()
    return tuple(float(np.median(block)) for block in np.array_split(np.asarray(samples), rounds))


def _cpu_threads(device: torch.device, nprocs: int) -> int:
    """Torch threads per CPU rank (0: leave alone), the cores shared out; OMP_NUM_THREADS wins."""
    if device.type != "cpu" or os.environ.get("OMP_NUM_THREADS"):
        return 0
    return max(1, (os.cpu_count() or 1) // nprocs)


def _median_step(ranks: list[RankTimes]) -> list[float]:
    """Per step, the slowest rank's time: the step is over when every rank is done."""
    return [max(r.step_ns[i] for r in ranks) for i in range(min(len(r.step_ns) for r in ranks))]


def run_ddp(
    bench: Bench,
    step_factory: str | StepFactory,
    *,
    nprocs: int = 2,
    nnodes: int = 1,
    rdzv_endpoint: str | None = None,
    backend: str | None = None,
    steps: int = 20,
    warmup: int = 3,
    name: str | None = None,
    allreduce_bytes: int | None = None,
    allreduce_iters: int = 10,
    scaling: bool = True,
    items_per_rank: float | None = None,
    min_scaling_efficiency: float | None = None,
    min_busbw_gbps: float | None = None,
    max_rank_imbalance: float | None = None,
    bandwidth_tolerance: float | None = 0.15,
    scaling_tolerance: float | None = 0.10,
    rounds: int = 4,
    timeout_s: float = 300.0,
) -> DdpReport:
    """Run ``step_factory``'s step on ``nprocs`` ranks per node, record it as ``ddp.<n>ranks`` with metrics.

    Metrics: ``busbw_gbps`` (all-reduce bus bandwidth), ``scaling_efficiency`` (one-rank
    step time / n-rank step time at a fixed per-rank batch; ``scaling`` adds that one-rank
    launch), ``rank_imbalance`` and informational ``rank<r>.step_ms``. For several nodes
    give ``nnodes`` and the same ``rdzv_endpoint`` (``host:port`` of node 0) on each, as
    with torchrun; only the node holding rank 0 records. The tolerances are the relative
    drops against the baseline that still pass (``None``: bounds only); ``rounds`` blocks
    of steps give the noise estimate. In smoke mode each rank runs one step, no one-rank run.
    """
    device = bench.device
    world = nprocs * nnodes
    name = name or f"ddp.{world}ranks"
    if nprocs < 1 or nnodes < 1:
        raise ValueError(f"nprocs and nnodes must be >= 1, got nprocs={nprocs}, nnodes={nnodes}")
    if device.type == "cuda" and nprocs > torch.cuda.device_count():
        raise DdpError(
            f"{nprocs} ranks per node need {nprocs} GPUs, this node has {torch.cuda.device_count()}",
            measurement=name,
        )
    backend = backend or ("nccl" if device.type == "cuda" else "gloo")
    smoke = bench.smoke
    spec = _RankSpec(
        factory=step_factory,
        device_type=device.type,
        backend=backend,
        steps=1 if smoke else steps,
        warmup=0 if smoke else warmup,
        allreduce_bytes=DEFAULT_ALLREDUCE_BYTES.get(device.type, 2**20) if allreduce_bytes is None else allreduce_bytes,
        allreduce_iters=1 if smoke else allreduce_iters,
        timeout_s=timeout_s,
        cpu_threads=_cpu_threads(device, nprocs),
    )
    if isinstance(step_factory, str):
        resolve_factory(step_factory)  # fail here, with the name, rather than in every rank

    def launch() -> tuple[Measurement, list[RankTimes]] | None:
        started = time.perf_counter()
        ranks = _launch(spec, nprocs, nnodes, rdzv_endpoint, name)
        if ranks is None:
            return None
        samples = _median_step(ranks)
        measurement = Measurement(
            test_id="",
            name=name,
            samples_ns=tuple(samples),
            calls_per_sample=1,
            device=str(device) if device.type == "cpu" else f"{device.type}:0",
            timer="perf_counter",
            round_medians_ns=_round_medians(samples, rounds),
            precision=stats.relative_precision(samples) if len(samples) > 1 else None,
            warmup_calls=spec.warmup,
            total_calls=spec.warmup + spec.steps,
            wall_time_s=time.perf_counter() - started,
            notes=(Note(f"{world} ranks, backend {backend}, hosts {sorted({r.hostname for r in ranks})}"),),
            throughput=Throughput(items=None if items_per_rank is None else items_per_rank * world),
        )
        return measurement, ranks

    first = launch()
    if first is None:
        return DdpReport(world, backend, None, notes=("rank 0 ran on another node",))
    measurement, ranks = first

    def remeasure() -> Measurement:
        again = launch()
        if again is None:
            raise DdpError("re-measure ran rank 0 on another node", measurement=name)
        return again[0]

    # A re-measure relaunches every rank; with several nodes that needs them all, so only one node.
    bench.record(measurement, remeasure=remeasure if nnodes == 1 else None)

    medians = {r.rank: statistics.median(r.step_ns) for r in ranks}
    for rank, med in sorted(medians.items()):
        bench.metric(
            f"rank{rank}.step_ms",
            med / 1e6,
            unit="ms",
            better="lower",
            tolerance=None,
            measurement=measurement.name,
            description=f"median step time of rank {rank}",
        )
    imbalance = max(medians.values()) / min(medians.values())
    bench.metric(
        "rank_imbalance",
        imbalance,
        unit="x",
        better="lower",
        tolerance=None,
        maximum=max_rank_imbalance,
        measurement=measurement.name,
        description="slowest rank's median step / fastest rank's",
    )

    algbw = busbw = None
    allreduce = [statistics.median(r.allreduce_ns) for r in ranks if r.allreduce_ns]
    if allreduce:
        algbw, busbw = bus_bandwidth(spec.allreduce_bytes, max(allreduce) / 1e9, world)
        bench.metric(
            "busbw_gbps",
            busbw / 1e9,
            unit="GB/s",
            better="higher",
            tolerance=bandwidth_tolerance,
            minimum=min_busbw_gbps,
            measurement=measurement.name,
            description=f"all-reduce bus bandwidth (nccl-tests busbw), {spec.allreduce_bytes} bytes, {backend}",
        )

    efficiency = one_rank = None
    if scaling and world > 1 and not smoke:
        single = dataclasses.replace(spec, allreduce_bytes=0)
        one = _launch(single, 1, 1, None, f"{name} (one-rank reference)")
        if one is not None:
            one_samples = _median_step(one)
            one_rank = dataclasses.replace(measurement, name=f"{name}.one_rank", samples_ns=tuple(one_samples))
            efficiency = statistics.median(one_samples) / statistics.median(measurement.samples_ns)
            bench.metric(
                "scaling_efficiency",
                efficiency,
                better="higher",
                tolerance=scaling_tolerance,
                minimum=min_scaling_efficiency,
                measurement=measurement.name,
                description=f"one-rank step time / {world}-rank step time (fixed per-rank batch)",
            )
    return DdpReport(
        world_size=world,
        backend=backend,
        measurement=measurement,
        ranks=tuple(ranks),
        busbw_gbps=busbw / 1e9 if busbw is not None else None,
        algbw_gbps=algbw / 1e9 if algbw is not None else None,
        scaling_efficiency=efficiency,
        rank_imbalance=imbalance,
        one_rank=one_rank,
        notes=tuple(n.text for n in measurement.notes),
    )
