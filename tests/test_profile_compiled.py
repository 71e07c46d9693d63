"""A profile pass over a torch.compile'd function: the user's warning filters and autograd mode do not break it."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

from pytest_gpuperf.measure.runner import MeasureSpec, Runner, RunnerOptions
from pytest_gpuperf.profiling.torch_profile import capture_calls

CPU = torch.device("cpu")


class Block(torch.nn.Module):
    """Two linears around a graph break, as the examples' planted graph break does."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.layer_norm(self.a(x), (16,))
        torch._dynamo.graph_break()
        return self.b(x)


def _compiled_in_inference_mode() -> tuple[Callable[..., object], torch.Tensor]:
    torch._dynamo.reset()
    fn = torch.compile(Block().eval(), backend="aot_eager")
    x = torch.randn(4, 16)
    with torch.inference_mode():
        fn(x)
    return fn, x


def test_dynamos_own_warnings_do_not_become_errors_while_profiling() -> None:
    fn, x = _compiled_in_inference_mode()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a project's filterwarnings = error
        # out of inference mode dynamo traces again and reads .grad of non-leaf tensors, which warns
        capture = capture_calls(fn, (x,), {}, trace_path=None, label="t", device=CPU, calls=2, detailed=False)
    assert capture.table is not None and capture.top_ops


def test_the_users_own_warnings_stay_errors_while_profiling() -> None:
    def warns() -> None:
        warnings.warn("the user's warning", UserWarning, stacklevel=1)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            capture_calls(warns, (), {}, trace_path=None, label="t", device=CPU, calls=1, detailed=False)
        except UserWarning as exc:
            assert "the user's warning" in str(exc)
        else:
            raise AssertionError("the user's filters were lifted for the user's code")


def test_a_profile_runs_in_the_autograd_mode_the_measurement_was_asked_for() -> None:
    modes: list[tuple[bool, bool]] = []

    def step() -> None:
        modes.append((torch.is_grad_enabled(), torch.is_inference_mode_enabled()))

    with torch.inference_mode():
        spec = MeasureSpec(step, test_id="t.py::test_step")
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    Runner(RunnerOptions(device=CPU)).profile(spec, trace_path=None, label="t", calls=3)
    assert modes and set(modes) == {(False, True)}
