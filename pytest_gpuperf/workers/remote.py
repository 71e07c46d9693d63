"""One worker process as the head sees it: what it is started with, and how to drive one measurement in it.

Every worker runs the head's pytest-gpuperf and only the user's code from its checkout; it is
forked from a zygote (twins.py). ``RemoteSide`` keeps what the head knows about one worker.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import WorkerError
from pytest_gpuperf.model import Measurement, OpProfile
from pytest_gpuperf.workers import lifeline, protocol
from pytest_gpuperf.workers.protocol import HeadChannel

START_TIMEOUT_S = 300.0  # a worker imports torch and collects the tests
RECV_TIMEOUT_S = 300.0  # one round, a warm-up or the rest of a test body


@dataclass(frozen=True)
class WorkerLaunch:
    """Where and how to start one worker process."""

    cwd: Path  # the folder the head's rootdir corresponds to, in this checkout
    import_roots: tuple[Path, ...]  # first on PYTHONPATH after the head's harness: this checkout's code
    files: tuple[str, ...]  # test files to collect, relative to cwd
    device: str
    pin_cpu: int | None
    basetemp: Path
    log_path: Path
    time_only: bool = False  # skip what only the first pair needs (CPU peak memory)
    worker_args: tuple[str, ...] = ()  # the head's plugins, options and settings (GpuperfConfig.worker_args)
    reference: bool = False  # time the host's reference work beside each measurement (a baseline-mode re-measure)


def worker_argv(launch: WorkerLaunch) -> list[str]:
    """The worker's pytest command line."""
    present = [f for f in launch.files if (launch.cwd / f).exists()]
    return [
        "-p", "pytest_gpuperf.workers.worker_plugin",
        "-p", "no:cacheprovider",
        *launch.worker_args,
        "--gpuperf", f"--gpuperf-device={launch.device}",
        # the same core as the head's rounds (or none): see host/cpu/pinning.py
        f"--gpuperf-pin-cpu={'off' if launch.pin_cpu is None else launch.pin_cpu}",
        "--continue-on-collection-errors", "-q",
        # the launcher imports the head's plugin before pytest starts (one harness), so pytest
        # cannot rewrite its asserts and says so; under filterwarnings=error that would end the worker
        "-W", "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning",
        f"--basetemp={launch.basetemp}",
        *present,
    ]  # fmt: skip


def head_harness_dir(scratch: Path) -> Path:
    """A folder in ``scratch`` holding only a link to this process's pytest_gpuperf package.

    First on the import path of a worker and its children, it makes ``import pytest_gpuperf``
    find the head's package while every other name resolves in the worker's checkout first.
    """
    folder = scratch / "harness"
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # the session's other workers made it
        (folder / "pytest_gpuperf").symlink_to(protocol.harness()["location"], target_is_directory=True)
    return folder


def worker_environment(harness: Path, import_roots: Sequence[Path]) -> dict[str, str]:
    """The environment of a process this one starts to measure; PYTHONPATH: harness, import_roots, its own."""
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)  # it carries --gpuperf-compare-ref: a worker must not recurse
    env[lifeline.ENV_PARENT] = str(os.getpid())
    env[protocol.ENV_HARNESS] = str(harness)
    own = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    env["PYTHONPATH"] = os.pathsep.join([str(harness), *map(str, import_roots), *own])
    return env


def channel_environment(fd: int, *, time_only: bool, reference: bool = False) -> dict[str, str]:
    """What a worker's plugin reads: its channel's end (``fd``, numbered as in the worker), whether it only times,
    whether it times the host's reference work beside each measurement."""
    return {protocol.ENV_FD: str(fd), protocol.ENV_TIME_ONLY: "1" if time_only else "0",
            protocol.ENV_REFERENCE: "1" if reference else "0"}  # fmt: skip


def check_harness(hello: Any, where: str) -> None:
    """WorkerError unless the worker's HELLO names the pytest-gpuperf this process runs."""
    mine = protocol.harness()
    info = hello if isinstance(hello, dict) else {}
    theirs = {name: str(info.get(name, "(unknown)")) for name in mine}
    if theirs != mine:
        raise WorkerError(
            f"--gpuperf-compare-ref worker: the worker {where} runs pytest-gpuperf {theirs['version']} "
            f"from {theirs['location']}, the head {mine['version']} from {mine['location']}: "
            "both sides must be measured by one harness"
        )


class RemoteSide:
    """The head's handle on one worker: run a test there up to a measurement, then drive its rounds."""

    def __init__(self, channel: HeadChannel, where: str, recv_timeout_s: float = RECV_TIMEOUT_S) -> None:
        self.channel = channel
        self.where = where  # "at main", "at the head's checkout": for messages
        self.recv_timeout_s = recv_timeout_s
        self.ready = False  # said HELLO
        self.test: str | None = None  # the test it runs now
        self.test_done = True
        self.test_note = ""
        self.unmeasurable = False  # has the test but could not measure it: "not gated" (a test it lacks is "new")
        self.open_key: str | None = None  # a measurement waiting for rounds
        self.final: dict[str, Measurement] = {}  # finished measurements, with their metrics

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait for the worker's HELLO; WorkerError unless it runs the head's harness."""
        if self.ready:
            return
        message = self.channel.recv(timeout_s, f"the worker to collect the tests {self.where}")
        if message[0] != protocol.HELLO:
            raise WorkerError(f"--gpuperf-compare-ref worker {self.where}: expected hello first, got {message[0]!r}")
        check_harness(message[1], self.where)
        self.ready = True

    def open(self, test_id: str, key: str, *, again: bool = False) -> str | None:
        """Run ``test_id`` up to measurement ``key`` (READY); None then, else why it never got there.

        A test already running (or run) here is continued: compare-ref opens its measurements one
        by one. ``again`` runs a finished test anew (the fresh re-measure process).
        """
        if self.test != test_id and (gone := self.channel.ended(f"{key} could run {self.where}")) is not None:
            raise gone
        if self.test != test_id or (again and self.test_done):
            self.drain()
            self.channel.send(protocol.RUN, test_id)
            self.test, self.test_done, self.test_note = test_id, False, ""
            self.unmeasurable = False
        while not self.test_done:
            message = self.channel.recv(self.recv_timeout_s, f"{key} {self.where}")
            if message[0] == protocol.READY and message[1] == key:
                self.open_key = key
                return None
            self.handle_background(message)
        return self.test_note or f"{key} not measured {self.where}"

    def round(self, budget_s: float) -> list[float] | None:
        """One round of the open measurement: its samples, or None when it failed or the test ended."""
        key = self.open_key
        self.channel.send(protocol.ROUND, budget_s)
        while True:
            message = self.channel.recv(self.recv_timeout_s, f"a round of {key} {self.where}")
            kind = message[0]
            if kind == protocol.SAMPLES:
                return [float(x) for x in message[1]]
            self.handle_background(message)
            if kind in (protocol.FAILED, protocol.DONE):
                self.open_key = None
                if not self.test_note:
                    self.test_note = f"{key} stopped {self.where}"
                if kind == protocol.FAILED:
                    self.drain()
                return None

    def finish(self, *, peak_memory: bool = True) -> Measurement:
        """End the open measurement; the worker's Measurement (its memory peaks unless not ``peak_memory``, metrics)."""
        key = self.open_key
        self.open_key = None
        self.channel.send(protocol.FINISH, peak_memory)
        measurement: Measurement = self._until(protocol.FINISHED, f"{key} to finish {self.where}")[1]
        return measurement

    def profile(self, key: str, trace: Path | None, calls: int) -> tuple[OpProfile | None, str]:
        """The worker's profile of ``key`` over ``calls`` calls after its test: (table, trace) or (None, why not)."""
        self.drain()
        self.channel.send(protocol.PROFILE, key, None if trace is None else str(trace), calls)
        message = self._until(protocol.PROFILED, f"the profile of {key} {self.where}")
        return message[1], str(message[2])

    def _until(self, kind: str, waiting_for: str) -> protocol.Message:
        """The next message of ``kind``; those before it are handled as background messages."""
        while True:
            message = self.channel.recv(self.recv_timeout_s, waiting_for)
            if message[0] == kind:
                return message
            self.handle_background(message)

    def handle_background(self, message: protocol.Message) -> None:
        """Messages nobody waits for: other measurements, results, the end of the test."""
        kind = message[0]
        if kind == protocol.READY:
            self.channel.send(protocol.SKIP)  # a measurement the head does not want (or not now)
        elif kind == protocol.MEASUREMENTS:
            self.final.update({m.key: m for m in message[1]})
        elif kind == protocol.FAILED:
            self.unmeasurable = True
            self.test_note = f"measurement {message[1]} failed {self.where}: {message[2]}"
        elif kind == protocol.MISSING:
            self.test_done = True
            why = message[2] if len(message) > 2 else None
            self.unmeasurable = why is not None
            self.test_note = f"test {message[1]} cannot run {self.where}: {why}" if why else (
                f"test {message[1]} does not exist {self.where}")  # fmt: skip
        elif kind == protocol.DONE:
            self.test_done = True
            outcome = message[2]
            if outcome.get("outcome") == "failed":
                self.unmeasurable = True
                if not self.test_note:
                    detail = outcome.get("detail", "").strip().splitlines()
                    self.test_note = f"the test failed {self.where}: {detail[-1] if detail else 'see the worker log'}"
        else:
            raise WorkerError(f"--gpuperf-compare-ref worker: unexpected message {kind!r}")

    def drain(self) -> None:
        """Let the worker finish its current test, skipping measurements nobody asked for."""
        self.abandon()
        while not self.test_done:
            self.handle_background(self.channel.recv(self.recv_timeout_s, f"{self.test} to finish {self.where}"))

    def abandon(self) -> None:
        if self.open_key is not None:
            self.open_key = None
            with contextlib.suppress(WorkerError):  # already failing; the first error is the one to see
                self.channel.send(protocol.SKIP)

    def close(self) -> None:
        """Stop the worker (QUIT, or closing the pipe) and wait for it; never raises."""
        self.request_stop()
        self.wait_stopped()

    def request_stop(self) -> None:
        """Ask the worker to end without waiting: several workers then wind down at the same time."""
        channel = self.channel
        if self.test_done and channel.process.poll() is None:
            with contextlib.suppress(WorkerError):
                channel.send(protocol.QUIT)
        channel.conn.close()
        if not self.test_done:
            # interrupted mid-test: the worker owns nothing that needs a clean exit
            channel.process.terminate()

    def wait_stopped(self) -> None:
        protocol.reap(self.channel.process)
