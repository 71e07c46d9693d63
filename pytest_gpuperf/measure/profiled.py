"""One side of a differential profile, taken in this process by the runner that measured it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.measure.runner import MeasureSpec, Runner
from pytest_gpuperf.model import OpProfile, measurement_key


@dataclass(frozen=True)
class ProfiledSide:
    """One side of a differential profile: its table and trace, or why there is none."""

    profile: OpProfile | None
    trace: str | None = None
    problem: str = ""


def profile_here(
    runner: Runner,
    spec: MeasureSpec,
    traces: Path | None,
    side: str,
    calls: int,
    budget_s: float | None = None,
    *,
    warm_call_s: float | None = None,
) -> ProfiledSide:
    """``spec`` profiled over ``calls`` calls here (Runner.profile; ``budget_s``: no more than fit in it), its trace
    in ``traces`` (None: no trace); ``warm_call_s``: one call's length where ``runner`` just measured ``spec``."""
    from pytest_gpuperf.profiling.torch_profile import trace_file

    key = measurement_key(spec.test_id, spec.name)
    path = trace_file(traces, key, side) if traces is not None else None
    try:
        capture = runner.profile(
            spec, trace_path=path, label=f"{key} ({side})", calls=calls, budget_s=budget_s, warm_call_s=warm_call_s
        )
    except Exception as exc:  # a profile explains a failure; it must never become one
        return ProfiledSide(None, problem=f"the {side}'s profile could not be taken ({type(exc).__name__}: {exc})")
    return ProfiledSide(capture.table, capture.trace_path)
