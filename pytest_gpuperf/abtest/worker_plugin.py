"""The pytest plugin of the base-ref worker process (``-p pytest_gpuperf.abtest.worker_plugin``).

Started by the head's CompareRefEngine inside the temporary worktree. It swaps
the session's engine for a WorkerEngine and replaces the run loop with a
command loop: RUN <nodeid> runs that one test (its ``gpu_bench`` measurements
then follow the head's ROUND commands), QUIT or a closed pipe ends the session.
Each test runs with ``nextitem=None``, so its fixtures of every scope are torn
down after it: the head picks the order, and a stale module fixture must never
leak into the next test.
"""

from __future__ import annotations

import pytest

from pytest_gpuperf.abtest import protocol
from pytest_gpuperf.abtest.protocol import WorkerChannel
from pytest_gpuperf.errors import GpuperfError

CHANNEL_KEY = pytest.StashKey[WorkerChannel]()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    from pytest_gpuperf.abtest.worker import WorkerEngine
    from pytest_gpuperf.engine import LocalEngine
    from pytest_gpuperf.plugin import STATE_KEY

    state = config.stash[STATE_KEY]
    if state.config.compare_ref:
        raise pytest.UsageError("the compare-ref worker cannot itself use --gpuperf-compare-ref")
    try:
        channel = WorkerChannel.from_environment()
        engine = state.ensure_started()
    except GpuperfError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not isinstance(engine, LocalEngine):
        raise pytest.UsageError(f"compare-ref worker: unexpected engine {type(engine).__name__}")
    state.engine = WorkerEngine(engine.runner, channel)
    config.stash[CHANNEL_KEY] = channel


# The outcome of the test the head asked for (a logreport hook has no config to stash it in).
_CURRENT: dict[str, str] | None = None


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
    channel = session.config.stash[CHANNEL_KEY]
    items = {item.nodeid: item for item in session.items}
    channel.send(protocol.HELLO, {"items": len(items)})
    while True:
        try:
            message = channel.recv()
        except (EOFError, OSError):
            break  # the head is gone
        kind = message[0]
        if kind == protocol.QUIT:
            break
        if kind != protocol.RUN:
            raise GpuperfError(f"compare-ref worker: expected a run command, got {kind!r}")
        nodeid = message[1]
        item = items.get(nodeid)
        if item is None:
            channel.send(protocol.MISSING, nodeid)
            continue
        _CURRENT = {"outcome": "passed"}
        try:
            item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
        finally:
            done, _CURRENT = _CURRENT, None
        channel.send(protocol.DONE, nodeid, done)
    return True
