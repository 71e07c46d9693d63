"""Which profiler takes a differential profile's table: torch.profiler by operator, or Python's by function.

The rule (``by_function``), one for every side of every diff and for the profile a baseline
entry stores: a call is profiled by function (python_profile.py) where torch is not installed,
or where a torch.profiler pass of it recorded no operator (plain Python, numpy: its whole time
falls outside any operator, where the operator table cannot split it); otherwise by operator
(torch_profile.py). The same function gets the same profiler on both sides unless one side's
code runs torch operators and the other's does not; two tables of different profilers do not
compare, and the diff says so (diff.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf.model import OpProfile
from pytest_gpuperf.profiling import python_profile, torch_profile
from pytest_gpuperf.torch_support import have_torch

if TYPE_CHECKING:
    import torch


def by_function(table: OpProfile) -> bool:
    """Whether a torch.profiler table of a call holds no operator: the call is plain Python (or numpy)."""
    return not any(s.name != torch_profile.OUTSIDE_OPS for s in table.ops)


def capture_calls(
    fn: Callable[..., object],
    args: Sequence[object],
    kwargs: Mapping[str, object],
    *,
    trace_path: Path | None,
    label: str,
    device: torch.device,
    calls: int,
    detailed: bool = False,
    budget_s: float | None = None,
    warm_call_s: float | None = None,
) -> torch_profile.ProfileCapture:
    """A differential profile's pass over ``calls`` calls of ``fn``, by operator or by function (``by_function``);
    the arguments are torch_profile.capture_calls's (``detailed``: shapes and memory too, by operator only)."""
    if have_torch():
        capture = torch_profile.capture_calls(fn, args, kwargs, trace_path=trace_path, label=label, device=device,
                                              calls=calls, detailed=detailed, budget_s=budget_s,
                                              warm_call_s=warm_call_s)  # fmt: skip
        if not by_function(capture.table):
            return capture
        if capture.trace_path is not None:  # a trace of no operator: the statistics by function replace it
            Path(capture.trace_path).unlink(missing_ok=True)
        warm_call_s = capture.table.host_ns / 1e9  # the call ran warm in that pass: no unprofiled call again
    return python_profile.capture_calls(fn, args, kwargs, trace_path=trace_path, calls=calls, budget_s=budget_s,
                                        warm_call_s=warm_call_s)  # fmt: skip
