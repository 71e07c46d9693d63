from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from pytest_gpuperf.paths.ddp import DdpError, bus_bandwidth, resolve_factory, run_ddp
from pytest_gpuperf.paths.standalone import StandaloneBench

STEPS = textwrap.dedent(
    """
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    def make_step(ctx):
        torch.manual_seed(0)
        model = DistributedDataParallel(torch.nn.Linear(16, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(8, 16)

        def step():
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        return step

    def broken(ctx):
        if ctx.rank == 1:
            raise RuntimeError("rank one cannot build its model")
        return lambda: dist.barrier()
    """
)


@pytest.fixture
def steps_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A step module on sys.path: the spawned ranks import it as the parent does."""
    (tmp_path / "gpuperf_ddp_steps.py").write_text(STEPS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("gpuperf_ddp_steps", None)
    return importlib.import_module("gpuperf_ddp_steps")


def test_bus_bandwidth_follows_nccl_tests() -> None:
    algbw, busbw = bus_bandwidth(1e9, 0.5, world_size=4)
    assert algbw == 2e9
    assert busbw == pytest.approx(2e9 * 2 * 3 / 4)
    assert bus_bandwidth(1e9, 1.0, world_size=1)[1] == 0.0
    with pytest.raises(ValueError):
        bus_bandwidth(1e9, 0.0, world_size=2)


def test_resolve_factory_names_what_is_wrong(steps_module: ModuleType) -> None:
    assert resolve_factory("gpuperf_ddp_steps:make_step") is steps_module.make_step
    with pytest.raises(DdpError, match="expected 'module:function'"):
        resolve_factory("gpuperf_ddp_steps.make_step")
    with pytest.raises(DdpError, match="cannot import 'no_such_module_xyz'"):
        resolve_factory("no_such_module_xyz:f")
    with pytest.raises(DdpError, match="has no 'nope'") as info:
        resolve_factory("gpuperf_ddp_steps:nope")
    assert info.value.factory == "gpuperf_ddp_steps:nope" and info.value.measurement is None


def test_two_gloo_ranks_are_recorded_with_bandwidth_and_scaling(steps_module: ModuleType) -> None:
    bench = StandaloneBench()
    report = run_ddp(
        bench,
        "gpuperf_ddp_steps:make_step",
        nprocs=2,
        steps=3,
        warmup=1,
        allreduce_bytes=1 << 16,
        allreduce_iters=2,
        items_per_rank=8,
    )
    assert report.backend == "gloo" and report.world_size == 2
    assert sorted(r.rank for r in report.ranks) == [0, 1]
    m = bench.measurements["ddp.2ranks"]
    assert m.test_id == "standalone" and len(m.samples_ns) == 3 and m.throughput.items == 16
    # each sample is the slowest rank's time for that step
    for i, sample in enumerate(m.samples_ns):
        assert sample == max(r.step_ns[i] for r in report.ranks)
    names = {x.name for x in m.metrics}
    assert {"rank0.step_ms", "rank1.step_ms", "rank_imbalance", "busbw_gbps", "scaling_efficiency"} <= names
    busbw = m.metric("busbw_gbps")
    assert busbw is not None and busbw.value > 0 and report.algbw_gbps is not None
    assert busbw.value == pytest.approx(report.algbw_gbps)  # 2(n-1)/n == 1 for two ranks
    assert report.one_rank is not None and report.scaling_efficiency is not None


def test_a_failing_rank_is_reported_by_rank(steps_module: ModuleType) -> None:
    # rank 0 then fails too (its peer is gone); the error names the rank that failed first
    with pytest.raises(
        DdpError, match=r"ddp\.2ranks: rank 1 failed first: RuntimeError: rank one cannot build"
    ) as info:
        run_ddp(StandaloneBench(), "gpuperf_ddp_steps:broken", nprocs=2, steps=1, warmup=0, timeout_s=20)
    assert info.value.measurement == "ddp.2ranks"
