"""The plugin's exceptions live in errors.py; their old homes still export them (issue 21)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import pytest_gpuperf
from pytest_gpuperf import errors
from pytest_gpuperf.errors import (
    AmpNumericsError,
    DdpError,
    GpuperfError,
    NoChanges,
    NonFiniteNumberError,
)

# (module the class was defined in before, class name)
MOVED = [
    ("pytest_gpuperf.verdict.stability", "NoChanges"),
    ("pytest_gpuperf.report.history", "HistoryError"),
    ("pytest_gpuperf.report.results_json", "ResultsError"),
    ("pytest_gpuperf.baseline.codec", "NonFiniteNumberError"),
    ("pytest_gpuperf.paths.ddp", "DdpError"),
    ("pytest_gpuperf.paths.amp", "AmpNumericsError"),
    ("pytest_gpuperf.gpu.nvml", "NvmlQueryError"),
    ("pytest_gpuperf.gpu.graphs", "GraphCaptureError"),
]


def test_every_exception_class_of_the_plugin_is_defined_in_errors_py() -> None:
    elsewhere = set()
    for info in pkgutil.walk_packages(pytest_gpuperf.__path__, "pytest_gpuperf."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == info.name:
                elsewhere.add(f"{info.name}.{value.__name__}")
    assert elsewhere <= {f"pytest_gpuperf.errors.{name}" for name in vars(errors)}


@pytest.mark.parametrize(("module", "name"), MOVED)
def test_a_moved_exception_is_still_importable_where_it_was(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


@pytest.mark.parametrize(("module", "name"), MOVED)
def test_a_moved_exception_says_what_it_is(module: str, name: str) -> None:
    assert getattr(errors, name).__doc__


def test_the_bases_keep_their_meaning() -> None:
    # a wrong autocast result fails a test as an assert does: the plugin's own handlers must not take it
    assert issubclass(AmpNumericsError, AssertionError) and not issubclass(AmpNumericsError, GpuperfError)
    # callers that catch ValueError still catch these
    assert issubclass(NoChanges, ValueError) and issubclass(NonFiniteNumberError, ValueError)
    for module, name in MOVED:
        if name != "AmpNumericsError":
            assert issubclass(getattr(errors, name), GpuperfError), (module, name)


def test_the_context_is_in_the_message_where_it_is_a_prefix() -> None:
    assert str(DdpError("rank 1 failed", measurement="ddp.2ranks")) == "ddp.2ranks: rank 1 failed"
    assert (
        str(DdpError("expected 'module:function'", factory="m.f")) == "step factory 'm.f': expected 'module:function'"
    )
    error = AmpNumericsError("outputs differ", measurement="amp.bf16", relative_error=0.5, tolerance=0.01)
    assert str(error) == "amp.bf16: outputs differ" and (error.relative_error, error.tolerance) == (0.5, 0.01)
