"""How many modules a reader follows from ``gpu_bench(...)`` to the printed verdict.

Runs one small perf test in this process (a baseline written, then the gate), with a profile
hook that sees every Python call. A call whose caller sits in another module of the package is
one step a reader takes across files, as a tool that follows calls (an IDE's call hierarchy,
pyan, a tracer) counts it. Printed per phase: the modules entered, the cross-module call edges,
and the longest chain of distinct modules on one call stack.

    python benchmarks/call_walk.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

PACKAGE = "pytest_gpuperf"
TEST = """
def work():
    return sum(range(200))

def test_walk(gpu_bench):
    gpu_bench(work)
"""
FAST = ["-q", "-p", "no:cacheprovider", "--gpuperf-warmup-time=0.01", "--gpuperf-min-time=0.05",
        "--gpuperf-max-time=0.2", "--gpuperf-remeasure=0", "--gpuperf-threshold=5"]  # fmt: skip


@dataclass
class Phase:
    """What one phase of the session called across the package's modules."""

    name: str
    modules: list[str] = field(default_factory=list)
    edges: set[tuple[str, str]] = field(default_factory=set)
    longest: list[str] = field(default_factory=list)


def _module_chain(frame: FrameType | None) -> list[str]:
    """The package's modules on the stack, outermost first; consecutive frames of one module count once."""
    chain: list[str] = []
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith(PACKAGE) and (not chain or chain[-1] != name):
            chain.append(name)
        frame = frame.f_back
    return chain[::-1]


@contextmanager
def _tracing(phase: Phase) -> Iterator[None]:
    """Record the package's calls while active: which modules, which cross-module edges, the deepest chain."""

    def hook(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith(PACKAGE):
            return
        if callee not in phase.modules:
            phase.modules.append(callee)
        caller = _caller_module(frame)
        if caller and caller != callee and caller.startswith(PACKAGE):
            phase.edges.add((caller, callee))
        chain = _module_chain(frame)
        if len(chain) > len(phase.longest):
            phase.longest = chain

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(previous)


def _caller_module(frame: FrameType) -> str | None:
    back = frame.f_back
    return None if back is None else str(back.f_globals.get("__name__", ""))


class _Walk:
    """A pytest plugin that traces the fixture's call and the session's end."""

    def __init__(self) -> None:
        self.measure = Phase("the test: the fixture set up, gpu_bench(...) measured, its verdict")
        self.report = Phase("session end: verdict written and printed")

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self) -> Iterator[None]:  # outermost: the test's setup, body, verdict
        with _tracing(self.measure):
            yield

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(self) -> Iterator[None]:
        with _tracing(self.report):
            yield

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_terminal_summary(self) -> Iterator[None]:
        with _tracing(self.report):
            yield


def _show(phase: Phase) -> None:
    print(f"{phase.name}:")
    print(f"  modules entered: {len(phase.modules)}")
    print(f"  cross-module call edges: {len(phase.edges)}")
    print(f"  longest chain of cross-module calls on one stack (modules in order): {len(phase.longest)}")
    for name in phase.longest:
        print(f"    {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list every module entered in each phase")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "test_walk.py").write_text(textwrap.dedent(TEST))
        (root / "pytest.ini").write_text("[pytest]\n")
        args_base = [str(root), "--rootdir", str(root), *FAST]
        if pytest.main([*args_base, "--gpuperf-update-baseline"]) != 0:
            print("the baseline could not be written", file=sys.stderr)
            return 1
        walk = _Walk()
        code = pytest.main([*args_base, "--gpuperf"], plugins=[walk])
    print()
    for phase in (walk.measure, walk.report):
        _show(phase)
        if args.list:
            for name in phase.modules:
                print(f"    entered {name}")
    print(f"distinct modules from gpu_bench(...) to the printed verdict: "
          f"{len(set(walk.measure.modules) | set(walk.report.modules))}")  # fmt: skip
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main())
