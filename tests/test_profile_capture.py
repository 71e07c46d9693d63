"""The per-call table of a profiler pass (torch_profile.op_table), the host-time metric, and where traces go."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from git_repo import git, init

from pytest_gpuperf.config import GpuperfConfig, resolve
from pytest_gpuperf.measure.runner import HOST_TIME_METRIC, MeasureSpec, Runner, RunnerOptions
from pytest_gpuperf.measure.timers import BlockObserver, WallTimer
from pytest_gpuperf.profiling.diff import diff_profiles
from pytest_gpuperf.profiling.quiet import without_chatter
from pytest_gpuperf.profiling.torch_profile import OUTSIDE_OPS, capture_calls, op_table
from pytest_gpuperf.report.why import why_lines


def event(key: str, start: float = 0.0, *, cpu: float = 0.0, total: float = 0.0, device: float = 0.0,
          cuda: bool = False, grid: list[int] | None = None,
          block: list[int] | None = None) -> SimpleNamespace:  # fmt: skip
    """One profiler event as ``prof.events()`` gives it: times in microseconds, ``start`` on the host's clock;
    a kernel's launch configuration in ``event_metadata`` as torch records it."""
    meta = SimpleNamespace(grid=grid, block=block) if grid is not None else None
    return SimpleNamespace(key=key, time_range=SimpleNamespace(start=start, end=start + total),
                           self_cpu_time_total=cpu, cpu_time_total=total, self_device_time_total=device,
                           device_type="CUDA" if cuda else "CPU", event_metadata=meta)  # fmt: skip


def is_cuda(e: SimpleNamespace) -> bool:
    return bool(e.device_type == "CUDA")


def test_a_cuda_pass_becomes_per_call_operators_kernels_and_host_time() -> None:
    # five measured calls, each in its gpuperf: range 1000 us apart; times in microseconds as torch reports them
    events = [event("ProfilerStep#2", 0.0, cpu=5.0, total=5000.0)]
    for i, outside in enumerate((20.0, 30.0, 10.0, 20.0, 20.0)):
        at = 1000.0 * i
        events += [
            event(f"gpuperf:t::m#{i + 1}", at, cpu=outside, total=100.0),
            event("aten::mm", at + 1, cpu=30.0, total=60.0, device=200.0),
            event("cudaLaunchKernel", at + 2, cpu=10.0, total=10.0),
            event("cudaLaunchKernel", at + 3, cpu=10.0, total=10.0),
            event("ampere_sgemm_128x64_nn", at + 50, device=200.0, cuda=True),
            event("triton_poi_fused_add_0", at + 60, device=5.0, cuda=True),
            event("triton_poi_fused_add_0", at + 70, device=5.0, cuda=True),
        ]
    table = op_table(events, calls=5, on_cuda=True, is_cuda_event=is_cuda, torch_version="2.5")
    assert table.on_device and table.profiled_calls == 5
    assert table.host_ns == pytest.approx(100_000.0)  # the ranges' CPU time per call
    assert table.device_ns == pytest.approx(210_000.0)  # the kernels' time per call
    rows = {(s.kind, s.name): s for s in table.ops}
    assert ("operator", "ProfilerStep#2") not in rows
    sgemm, triton = rows[("kernel", "ampere_sgemm_128x64_nn")], rows[("kernel", "triton_poi_fused_add_0")]
    assert (sgemm.calls, sgemm.device_ns, sgemm.host_ns) == (1.0, pytest.approx(200_000.0), 0.0)
    assert sgemm.device_samples_ns == pytest.approx((200_000.0,) * 5)  # each kernel in the call that launched it
    assert table.device_samples_ns == pytest.approx((210_000.0,) * 5)
    assert triton.calls == 2.0  # launched twice per call
    assert rows[("operator", "aten::mm")].host_ns == pytest.approx(30_000.0)
    assert rows[("operator", "cudaLaunchKernel")].host_ns == pytest.approx(20_000.0)  # twice in each call
    assert rows[("operator", OUTSIDE_OPS)].host_ns == pytest.approx(20_000.0)  # Python between the ops
    assert [s.name for s in table.ops[:2]] == ["aten::mm", "ampere_sgemm_128x64_nn"]  # by device time


def test_a_preempted_call_is_left_out_of_every_row_and_the_rest_are_kept_per_call() -> None:
    # the first recorded call carries the profiler's start-up (or a preemption): 5 ms outside any operator
    events = []
    for i, outside in enumerate((5000.0, 20.0, 22.0, 18.0, 20.0)):
        events += [event(f"gpuperf:t#{i + 1}", 10_000.0 * i, cpu=outside, total=outside + 40.0),
                   event("aten::add", 10_000.0 * i + 1, cpu=40.0 if i else 400.0, total=40.0)]  # fmt: skip
    table = op_table(events, calls=5, on_cuda=False, is_cuda_event=is_cuda)
    rows = {s.name: s for s in table.ops}
    assert rows[OUTSIDE_OPS].host_ns == pytest.approx(20_000.0)  # the mean of the four calls kept
    assert rows[OUTSIDE_OPS].host_samples_ns == pytest.approx((20_000.0, 22_000.0, 18_000.0, 20_000.0))
    assert rows["aten::add"].host_ns == pytest.approx(40_000.0) and rows["aten::add"].calls == 1.0
    assert rows["aten::add"].host_samples_ns == pytest.approx((40_000.0,) * 4)  # its 400 us went with the call
    assert table.host_ns == pytest.approx(60_000.0)
    assert table.host_samples_ns == pytest.approx((60_000.0, 62_000.0, 58_000.0, 60_000.0))


def test_the_table_is_bounded_and_keeps_the_slowest_host_side_ops_on_cuda() -> None:
    events = [event(f"k{i}", device=100.0 + i, cuda=True) for i in range(40)]
    events += [event("gpuperf:t#1", 0.0, total=1000.0),
               event("aten::slow_launch", 1.0, cpu=500.0)]  # no device time: kept for its host time  # fmt: skip
    table = op_table(events, calls=1, on_cuda=True, is_cuda_event=is_cuda, limit=10)
    names = [s.name for s in table.ops]
    assert names[:10] == [f"k{i}" for i in range(39, 29, -1)]
    assert names[10:] == ["aten::slow_launch"]
    assert table.omitted_below_ns == pytest.approx(129_000.0)  # k29 was the slowest left out
    whole = op_table(events, calls=1, on_cuda=True, is_cuda_event=is_cuda, limit=50)
    assert whole.omitted_below_ns == 0.0


def test_a_slow_first_call_does_not_make_host_time_the_why() -> None:
    """Real profiles: the head's first recorded call stalls outside any operator (the profiler's start-up,
    a preemption), and the head really does an extra ``aten::mm``: the diff's first row is the mm."""
    x, a = torch.randn(64, 256), torch.randn(160, 160)
    seen = {"head": 0}

    def base() -> torch.Tensor:
        return torch.relu(x)

    def head() -> torch.Tensor:
        seen["head"] += 1
        if seen["head"] == 3:  # one unprofiled call, one the profiler discards, then the first recorded one
            time.sleep(0.02)
        return torch.relu(x) + torch.mm(a, a).sum()

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a busy shared host stalls a thread pool in every call alike
    try:
        cpu = torch.device("cpu")
        base_table = capture_calls(base, (), {}, trace_path=None, label="b", device=cpu, detailed=False).table
        head_table = capture_calls(head, (), {}, trace_path=None, label="h", device=cpu, detailed=False).table
    finally:
        torch.set_num_threads(threads)
    diff = diff_profiles(head_table, base_table, base_label="base")
    assert diff.changes[0].name == "aten::mm", [(c.name, c.delta_ns) for c in diff.changes]
    assert diff.rows[0].name == "aten::mm" and diff.rows[0].role == "cause", diff.rows
    assert "aten::mm" in why_lines(diff)[2]


def test_a_cpu_capture_counts_calls_per_measured_call() -> None:
    a = torch.randn(32, 32)

    def twice() -> torch.Tensor:
        return torch.mm(torch.mm(a, a), a)

    table = capture_calls(twice, (), {}, trace_path=None, label="t", device=torch.device("cpu"), calls=3,
                          detailed=False).table  # fmt: skip
    mm = next(s for s in table.ops if s.name == "aten::mm")
    assert mm.calls == 2.0 and mm.device_ns == 0.0
    assert table.device_type == "cpu" and table.device_ns is None and table.profiled_calls == 3
    # self times inside the call's own time; each figure is the median over the calls, and a sum of
    # medians may exceed the median call's total by the calls' spread (a few percent on a busy host)
    assert table.host_ns >= sum(s.host_ns for s in table.ops) * 0.9


def test_a_capture_keeps_the_profilers_chatter_out_of_stderr_and_the_codes_own_output_in(
    capfd: pytest.CaptureFixture[str],
) -> None:
    a = torch.randn(8, 8)

    def noisy() -> torch.Tensor:
        os.write(2, b"the measured code's own line\n")
        return torch.mm(a, a)

    capture_calls(noisy, (), {}, trace_path=None, label="t", device=torch.device("cpu"), calls=2, detailed=False)
    err = capfd.readouterr().err
    assert "profiler_start" not in err and "profiler_stop" not in err and "Completed Stage" not in err
    assert err.count("the measured code's own line") == 4  # one unprofiled call, a discarded one, two recorded


def test_only_the_profilers_own_lines_are_chatter() -> None:
    text = (b"USDT:2026-11-24 17:18:21 23419:23419 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
            b"STAGE:2026-11-24 17:18:30 23463:23463 SyncActivityProfilerHandler.cpp:51] Completed Stage: Warm Up\n"
            b"USDT: a user's line that merely starts alike\n"
            b"warning: something real\n")  # fmt: skip
    assert without_chatter(text) == b"USDT: a user's line that merely starts alike\nwarning: something real\n"


class LaunchTimer(WallTimer):
    """A timer of device time whose host side took a known time per block, as CudaEventTimer reports it."""

    def __init__(self) -> None:
        self.calls = 0

    def time_blocks(
        self, call: Callable[[], object], calls: int, samples: int, between: object = None,
        deadline_ns: float | None = None, observer: BlockObserver | None = None,
    ) -> list[float]:  # fmt: skip
        self.calls = calls
        self._samples = samples
        for _ in range(samples):
            if observer is not None:
                observer.before_block()
                observer.after_block(1_000_000.0)
        return [1_000_000.0] * samples

    def host_block_ns(self) -> list[float]:
        return [3_000.0 * self.calls] * self._samples


def test_a_timer_with_host_times_adds_the_host_time_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_gpuperf.measure.runner.timer_for", lambda device, **_: LaunchTimer())
    settings = dataclasses.replace(resolve(GpuperfConfig(enabled=True)).measure, min_time_s=0.0, max_time_s=0.01)
    m = Runner(RunnerOptions(device=torch.device("cpu"))).measure(MeasureSpec(fn=time.perf_counter, settings=settings))
    (host,) = [x for x in m.metrics if x.name == HOST_TIME_METRIC]
    assert (host.value, host.unit, host.better) == (3_000.0, "ns", "lower")
    assert host.tolerance is not None and host.tolerance > 0


def test_the_wall_clock_reports_no_separate_host_time() -> None:
    settings = dataclasses.replace(resolve(GpuperfConfig(enabled=True)).measure, min_time_s=0.0, max_time_s=0.01)
    m = Runner(RunnerOptions(device=torch.device("cpu"))).measure(MeasureSpec(fn=time.perf_counter, settings=settings))
    assert all(x.name != HOST_TIME_METRIC for x in m.metrics)


def test_traces_go_beside_the_first_report_else_the_profile_folder_else_the_rootdir(tmp_path: Path) -> None:
    root = GpuperfConfig(rootdir=tmp_path)
    assert root.traces_dir == tmp_path / ".gpuperf" / "profiles"
    profiled = dataclasses.replace(root, profile_dir=tmp_path / "prof")
    assert profiled.traces_dir == tmp_path / "prof"
    reported = dataclasses.replace(profiled, html_path=tmp_path / "r" / "a.html", json_path=tmp_path / "j" / "r.json")
    assert reported.traces_dir == tmp_path / "j" / "gpuperf-profiles"


def test_a_budget_profiles_fewer_calls_of_a_long_call() -> None:
    def long_call() -> None:
        time.sleep(0.06)

    cpu = torch.device("cpu")
    budgeted = capture_calls(long_call, (), {}, trace_path=None, label="t", device=cpu, calls=3, detailed=False,
                             budget_s=0.1).table  # fmt: skip
    assert budgeted.profiled_calls == 1
    quick = capture_calls(torch.mm, (torch.eye(4), torch.eye(4)), {}, trace_path=None, label="t", device=cpu,
                          calls=3, detailed=False, budget_s=0.1).table  # fmt: skip
    assert quick.profiled_calls == 3


def test_a_call_just_measured_here_is_profiled_without_an_unprofiled_call_first() -> None:
    made: list[int] = []

    def counted() -> None:
        made.append(1)
        time.sleep(0.03)

    cpu = torch.device("cpu")
    cold = capture_calls(counted, (), {}, trace_path=None, label="t", device=cpu, calls=2, detailed=False).table
    assert cold.profiled_calls == 2 and len(made) == 4  # an unprofiled call, the profiled warm-up #0, two
    made.clear()
    warm = capture_calls(counted, (), {}, trace_path=None, label="t", device=cpu, calls=3, detailed=False,
                         budget_s=0.1, warm_call_s=0.05).table  # fmt: skip
    assert warm.profiled_calls == 2 and len(made) == 3  # the warm-up #0 and the two that fit in 0.1 s of 0.05 s


def test_a_trace_folder_it_creates_in_a_repository_stays_out_of_git(tmp_path: Path) -> None:
    init(tmp_path)
    a = torch.randn(8, 8)
    trace = GpuperfConfig(rootdir=tmp_path).traces_dir / "t.json"
    capture = capture_calls(torch.mm, (a, a), {}, trace_path=trace, label="t", device=torch.device("cpu"), calls=1)
    assert capture.trace_path == str(trace) and trace.is_file()
    assert git(tmp_path, "status", "--porcelain", "--untracked-files=all") == ""
    # a folder the user made is theirs: nothing is added to it
    mine = tmp_path / "mine"
    mine.mkdir()
    capture_calls(torch.mm, (a, a), {}, trace_path=mine / "t.json", label="t", device=torch.device("cpu"), calls=1)
    assert sorted(p.name for p in mine.iterdir()) == ["t.json"]


def test_the_option_is_resolved_into_each_tests_settings() -> None:
    assert resolve(GpuperfConfig(enabled=True)).profile_diff
    assert not resolve(GpuperfConfig(enabled=True, profile_diff=False)).profile_diff
    assert not resolve(GpuperfConfig(enabled=False)).profile_diff  # smoke mode profiles nothing


def test_a_kernels_identity_is_its_name_grid_and_block_where_the_profiler_records_them() -> None:
    events = [event("gpuperf:t#1", 0.0, total=100.0), event("aten::mm", 1.0, cpu=10.0, total=10.0),
              event("sm90_gemm", 5.0, device=50.0, cuda=True, grid=[128, 1, 1], block=[256, 1, 1]),
              event("triton_add", 6.0, device=5.0, cuda=True)]  # fmt: skip
    table = op_table(events, calls=1, on_cuda=True, is_cuda_event=is_cuda)
    kernels = sorted(s.name for s in table.ops if s.kind == "kernel")
    assert kernels == ["sm90_gemm [grid 128x1x1, block 256x1x1]", "triton_add"]
