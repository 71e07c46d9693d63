"""A differential profile by Python function (profiling/python_profile.py) and which profiler a call gets
(profiling/capture.py): real cProfile passes over real functions."""

from __future__ import annotations

import cProfile
import importlib.util
import pstats
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from pytest_gpuperf.model import MeasuredChange
from pytest_gpuperf.profiling import capture, python_profile
from pytest_gpuperf.profiling.diff import diff_profiles
from pytest_gpuperf.profiling.python_profile import ProfilerCost
from pytest_gpuperf.report.why import headline, why_lines

CPU = torch.device("cpu")
MODULE = __name__


def helper(n: int) -> int:
    return sum(i * i for i in range(n))


def work(extra: int = 0) -> int:
    total = helper(500) + helper(500) + helper(500)
    for i in range(extra):  # planted: more work in work's own code
        total += i * i
    return total


def test_rows_are_functions_by_module_and_name_and_add_up_to_each_call(tmp_path: Path) -> None:
    taken = python_profile.capture_calls(work, (), {}, trace_path=tmp_path / "t.head.json", calls=5)
    table = taken.table
    assert table.profiler == "python" and table.torch is None and table.device_type == "cpu"
    by_name = {s.name: s for s in table.ops}
    assert {s.kind for s in table.ops} == {"function"}
    assert by_name[f"{MODULE}:helper"].calls == 3.0 and by_name[f"{MODULE}:work"].calls == 1.0
    assert f"{MODULE}:helper.<locals>.<genexpr>" in by_name  # qualified: where a function is defined
    assert "<built-in method builtins.sum>" in by_name  # a built-in by the profiler's own words
    assert not any("_lsprof" in name for name in by_name)  # the profiler's own calls are not rows
    n = len(table.host_samples_ns)
    assert n >= 3 and all(len(s.host_samples_ns) == n for s in table.ops)
    for i in range(n):  # self times: the rows add up to each profiled call
        assert sum(s.host_samples_ns[i] for s in table.ops) == pytest.approx(table.host_samples_ns[i])
    assert taken.trace_path == str(tmp_path / "t.head.pstats")
    assert pstats.Stats(taken.trace_path).total_calls > 0  # the pass's statistics, for python -m pstats
    assert taken.activities == ("python",) and taken.top_ops[0][0] in by_name


def load_suite(folder: Path) -> Callable[[], int]:
    """``suite.py`` in ``folder`` imported as the module ``suite`` (as each worktree of compare-ref imports it)."""
    (folder / "suite.py").write_text("def run():\n    return sum(range(20000))\n")
    spec = importlib.util.spec_from_file_location("suite", folder / "suite.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["suite"] = module
    spec.loader.exec_module(module)
    return module.run  # type: ignore[no-any-return]


def test_a_function_has_the_same_name_wherever_its_checkout_lies(tmp_path: Path) -> None:
    names = []
    for side in ("head", "base"):
        (tmp_path / side).mkdir()
        run = load_suite(tmp_path / side)
        names.append({s.name for s in python_profile.capture_calls(run, (), {}, trace_path=None, calls=2).table.ops})
    del sys.modules["suite"]
    assert names[0] == names[1] and "suite:run" in names[0]


def test_a_planted_slowdown_in_one_function_is_the_first_cause() -> None:
    head = python_profile.capture_calls(work, (20_000,), {}, trace_path=None, calls=8).table
    base = python_profile.capture_calls(work, (0,), {}, trace_path=None, calls=8).table
    diff = diff_profiles(head, base, base_label="base")
    first = diff.rows[0]
    assert (first.name, first.kind, first.reading, first.role) == (f"{MODULE}:work", "function", "slower", "cause")
    assert diff.basis == "host" and diff.finding == "explained"
    assert why_lines(diff)[0] == "why (profile vs base, time per call by Python function):"
    words = headline(diff)
    assert words is not None and f"{MODULE}:work (slower per call)" in words


def test_a_call_that_runs_no_torch_operator_is_profiled_by_function(tmp_path: Path) -> None:
    def side(fn: Callable[[], object], name: str) -> capture.torch_profile.ProfileCapture:
        return capture.capture_calls(fn, (), {}, trace_path=tmp_path / f"{name}.head.json", label=name, device=CPU,
                                     calls=3)  # fmt: skip

    x = torch.randn(64, 64)
    by_operator = side(lambda: torch.mm(x, x), "tensor")
    assert by_operator.table.profiler == "torch" and any(s.name == "aten::mm" for s in by_operator.table.ops)
    assert by_operator.trace_path == str(tmp_path / "tensor.head.json")
    by_function = side(work, "plain")
    assert by_function.table.profiler == "python" and f"{MODULE}:work" in {s.name for s in by_function.table.ops}
    assert by_function.trace_path == str(tmp_path / "plain.head.pstats")
    assert not (tmp_path / "plain.head.json").exists()  # the operator trace of no operator is not kept


def test_tables_of_two_profilers_do_not_compare_and_the_note_says_why() -> None:
    x = torch.randn(64, 64)
    torch_table = capture.capture_calls(lambda: torch.mm(x, x), (), {}, trace_path=None, label="t", device=CPU,
                                        calls=3).table  # fmt: skip
    python_table = python_profile.capture_calls(work, (), {}, trace_path=None, calls=3).table
    diff = diff_profiles(python_table, torch_table, base_label="baseline", measured=MeasuredChange(1e3, 5e2, 2e3))
    assert diff.base is None and diff.rows == ()
    assert diff.note.startswith("baseline's profile is by operator (torch.profiler), the head's by function")
    assert diff.changes and all(c.kind == "function" for c in diff.changes)


def test_the_profilers_own_cost_is_taken_off_each_row() -> None:
    """Each call a function makes costs it the calibrated time, and its Python code's time is divided by the line
    factor; a C function's own time is kept."""
    profiler = cProfile.Profile()
    profiler.runcall(work)
    entries = profiler.getstats()

    def own(cost: ProfilerCost) -> dict[str, float]:
        return {s.name: s.host_ns for s in python_profile.function_table([entries], calls=1, cost=cost).ops}

    raw = own(ProfilerCost(0.0, 0.0, 0.0, 0.0, 1.0))
    corrected = own(ProfilerCost(python_call_ns=100.0, c_call_ns=40.0, python_callee_ns=10.0, c_callee_ns=5.0,
                                 line_factor=2.0))  # fmt: skip
    # work: called once, calls helper 3 times; helper: called 3 times, calls sum once each; sum: called 3 times
    assert corrected[f"{MODULE}:work"] == pytest.approx(max(0.0, raw[f"{MODULE}:work"] - 10.0 - 3 * 100.0) / 2)
    assert corrected[f"{MODULE}:helper"] == pytest.approx(max(0.0, raw[f"{MODULE}:helper"] - 3 * 10.0 - 3 * 40.0) / 2)
    assert corrected["<built-in method builtins.sum>"] == pytest.approx(raw["<built-in method builtins.sum>"] - 3 * 5.0)
    measured = python_profile.profiler_cost()  # this process's, measured once
    assert measured.line_factor >= 1.0 and min(measured.python_call_ns, measured.c_call_ns) >= 0.0
    assert python_profile.profiler_cost() is measured
