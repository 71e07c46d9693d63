"""What every profile table shares (profiling/table.py): a capture keeps every row, a baseline entry its longest."""

from __future__ import annotations

import pytest
import torch
from gpt_block import gpt_step

from pytest_gpuperf.model import OpProfile, OpStat
from pytest_gpuperf.profiling.table import STORED_ROWS, stored_table, top_rows, typical_calls
from pytest_gpuperf.profiling.torch_profile import capture_calls


def table(n: int) -> OpProfile:
    ops = tuple(OpStat(f"aten::op{i}", "operator", 1.0, 1000.0 * (i + 1)) for i in range(n))
    return OpProfile("cpu", 3, sum(s.host_ns for s in ops), ops=ops)


def test_a_stored_table_keeps_its_longest_rows_and_records_its_cut() -> None:
    stored = stored_table(table(40), limit=30)
    assert stored is not None and len(stored.ops) == 30
    assert min(s.host_ns for s in stored.ops) == 11_000.0
    assert stored.omitted_below_ns == 10_000.0  # the longest row left out
    whole = stored_table(table(20), limit=30)
    assert whole is not None and set(whole.ops) == set(table(20).ops) and whole.omitted_below_ns == 0.0
    assert stored_table(None) is None


def test_without_a_limit_every_row_is_kept() -> None:
    ops, cut = top_rows(table(50).ops, on_cuda=False, limit=None)
    assert len(ops) == 50 and cut == 0.0


def test_a_preempted_call_is_left_out() -> None:
    assert typical_calls([10.0, 11.0, 30.0, 9.0]) == [0, 1, 3]
    assert typical_calls([10.0, 40.0]) == [0, 1]  # too few to tell


def test_a_real_models_capture_keeps_every_operator_and_its_stored_table_the_longest() -> None:
    """A small GPT's forward and backward runs more operators than a baseline entry keeps: the differential profile
    compares them all, so an operator both sides run never reads as removed because one table was cut."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        capture = capture_calls(gpt_step(False, True), (), {}, trace_path=None, label="gpt",
                                device=torch.device("cpu"), calls=3, detailed=False)  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    assert len(capture.table.ops) > STORED_ROWS and capture.table.omitted_below_ns == 0.0
    stored = stored_table(capture.table)
    assert stored is not None and len(stored.ops) == STORED_ROWS
    left_out = {s.name for s in capture.table.ops} - {s.name for s in stored.ops}
    longest_left_out = max(s.host_ns for s in capture.table.ops if s.name in left_out)
    assert stored.omitted_below_ns == pytest.approx(longest_left_out)
    assert min(s.host_ns for s in stored.ops) >= longest_left_out
