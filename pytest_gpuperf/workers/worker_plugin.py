"""The pytest plugin of a worker process (``-p pytest_gpuperf.workers.worker_plugin``).

A command loop replaces the run loop. Each test runs with ``nextitem=None``, so its
fixtures of every scope are torn down after it: the head picks the order, and a stale
module fixture must never leak into the next test.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import TYPE_CHECKING, NoReturn

import pytest

from pytest_gpuperf.errors import GpuperfError
from pytest_gpuperf.workers import protocol
from pytest_gpuperf.workers.protocol import WorkerChannel

if TYPE_CHECKING:
    from pytest_gpuperf.measure.runner import Runner
    from pytest_gpuperf.workers.worker import WorkerEngine

ENGINE_KEY = pytest.StashKey["WorkerEngine"]()


def worker_engine(config: pytest.Config, runner: Runner) -> WorkerEngine:
    """The engine of this process, built by the session (session.py) from its runner: it follows the head."""
    from pytest_gpuperf.measure.runner import Runner
    from pytest_gpuperf.workers.worker import WorkerEngine

    channel = WorkerChannel.from_environment()
    # a baseline-mode re-measure times the host's reference beside the test, as the session did; a compare-ref
    # worker does not, as its head does not
    runner = Runner(dataclasses.replace(runner.options, reference=os.environ.get(protocol.ENV_REFERENCE) == "1"))
    if os.environ.get(protocol.ENV_TIME_ONLY) == "1":  # a confirmation worker only times: no peak-memory pass
        from pytest_gpuperf.measure.host import guard_for
        from pytest_gpuperf.modes import Mode, plan_for

        pin = runner.guard.pin_cpu
        guard = guard_for(runner.options.device, plan=plan_for(Mode.BASELINE),
                          pin_cpu="off" if pin is None else str(pin), peak_memory=False)  # fmt: skip
        runner = Runner(dataclasses.replace(runner.options, guard=guard))
    engine = config.stash[ENGINE_KEY] = WorkerEngine(runner, channel)
    return engine


# The outcome of the test the head asked for (a logreport hook has no config to stash it in).
_CURRENT: dict[str, str] | None = None
# Collectors (modules, classes, conftest folders) this checkout could not collect: node id -> why.
_UNCOLLECTED: dict[str, str] = {}


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        lines = report.longreprtext.strip().splitlines()
        last = lines[-1] if lines else "collection failed"
        _UNCOLLECTED[report.nodeid] = last[1:].strip() if last.startswith("E ") else last  # pytest's "E   " gutter


def uncollected_reason(nodeid: str, failed: dict[str, str]) -> str | None:
    """Why this checkout has ``nodeid`` yet could not collect it (its module or a parent failed); None: absent."""
    for collector, why in failed.items():
        if not collector or nodeid == collector or nodeid.startswith((collector + "::", collector + "/")):
            return f"{collector or 'the rootdir'} could not be collected: {why}"
    return None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    outcomes = _CURRENT
    if outcomes is None:
        return
    if report.failed:
        outcomes["outcome"] = "failed"
        outcomes["detail"] = report.longreprtext[-2000:]
    elif report.skipped and outcomes.get("outcome") != "failed":
        outcomes["outcome"] = "skipped"


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool:
    global _CURRENT
    channel = _engine(session.config).channel
    items = {item.nodeid: item for item in session.items}
    _keep_harness_first()
    channel.send(protocol.HELLO, {"items": len(items), **protocol.harness()})
    while True:
        try:
            message = channel.recv()
        except (EOFError, OSError):
            _exit_now()  # the head is gone
        kind = message[0]
        if kind == protocol.QUIT:
            _exit_now()
        if kind == protocol.PROFILE:
            channel.send(protocol.PROFILED, *_engine(session.config).profile(*message[1:4]))
            continue
        if kind != protocol.RUN:
            raise GpuperfError(f"compare-ref worker: expected a run command, got {kind!r}")
        nodeid = message[1]
        item = items.get(nodeid)
        if item is None:
            channel.send(protocol.MISSING, nodeid, uncollected_reason(nodeid, _UNCOLLECTED))
            continue
        _CURRENT = {"outcome": "passed"}
        try:
            item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
        finally:
            done, _CURRENT = _CURRENT, None
        _release_cuda_cache()
        channel.send(protocol.DONE, nodeid, done)
    return True


def _keep_harness_first() -> None:
    """Put the head's harness back in front of what collection put on sys.path (``pythonpath`` ini, rootdirs).

    The spawn children its tests start (DDP ranks) import pytest_gpuperf anew with a copy of sys.path.
    """
    harness = os.environ.get(protocol.ENV_HARNESS)
    if harness and sys.path[:1] != [harness]:
        sys.path[:] = [harness, *(p for p in sys.path if p != harness)]


def _exit_now() -> NoReturn:
    """End the worker at once: every test it ran is torn down and its results are with the head.

    The end-of-session hooks and teardown would only cost seconds per worker, a dozen with confirmation pairs.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _engine(config: pytest.Config) -> WorkerEngine:
    return config.stash[ENGINE_KEY]  # worker_engine put it there


def _release_cuda_cache() -> None:
    """Hand cached CUDA blocks back after each test: with confirmation pairs, many workers share one GPU."""
    torch = sys.modules.get("torch")  # never loaded: no CUDA cache
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
