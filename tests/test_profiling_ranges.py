"""NVTX ranges and Nsight capture ranges: cheap no-ops where they cannot work."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import nvtx
import pytest
import torch

from pytest_gpuperf.profiling import nsight
from pytest_gpuperf.profiling.nsight import CPU_NOTE, capture_range
from pytest_gpuperf.profiling.nvtx_ranges import DOMAIN, nvtx_range


def test_nvtx_range_runs_the_block_on_cpu() -> None:
    ran = []
    with nvtx_range("test::range"):
        ran.append(True)
    assert ran == [True]


def test_nvtx_range_pushes_in_the_plugin_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    pushed: list[tuple[str, str | None]] = []

    @contextlib.contextmanager
    def annotate(message: str, domain: str | None = None) -> Iterator[None]:
        pushed.append((message, domain))
        yield

    monkeypatch.setattr(nvtx, "annotate", annotate)
    with nvtx_range("t.py::test::default"):
        pass
    with nvtx_range("skipped", enabled=False):
        pass
    assert pushed == [("t.py::test::default", DOMAIN)]
    assert DOMAIN == "pytest-gpuperf"


def test_nvtx_range_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nvtx", None)
    with nvtx_range("no nvtx") as value:
        assert value is None


def test_nvtx_range_lets_errors_through() -> None:
    with pytest.raises(KeyError), nvtx_range("failing"):
        raise KeyError("x")


def test_capture_range_disabled_does_nothing() -> None:
    with capture_range(False, torch.device("cpu")) as state:
        assert state.active is False
        assert state.note is None


def test_capture_range_on_cpu_notes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nsight, "_cpu_noted", False)
    with capture_range(True, torch.device("cpu")) as first:
        assert first.active is False
    with capture_range(True, torch.device("cpu")) as second:
        pass
    assert first.note == CPU_NOTE
    assert second.note is None
