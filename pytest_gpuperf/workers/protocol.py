"""The head <-> worker message protocol over a private socket pair.

``multiprocessing.Pipe()``: the worker inherits its end (``pass_fds``) and finds it through
``GPUPERF_WORKER_FD``; no port is opened. Messages are tuples ``(kind, *payload)``.

Head -> worker:  RUN nodeid | ROUND budget_s | FINISH [peak-memory: bool, True if absent] | SKIP |
                 PROFILE key trace-path-or-None calls | QUIT
Worker -> head:  HELLO info | MISSING nodeid why-or-None | READY key | SAMPLES [ns...] |
                 FINISHED measurement | FAILED key text | MEASUREMENTS [m...] |
                 DONE nodeid outcome | PROFILED op-profile-or-None trace-or-problem

SAMPLES: a round's samples per call with their run-queue wait taken out (what the head alternates on).

MISSING's why: the test's module (or a parent) could not be collected; None: no such test.
HELLO's info: ``items`` (tests collected) and ``harness()``, which must be the head's.
PROFILE comes only between tests. Every receive on the head has a timeout and
watches the worker process: a crashed or hung worker is a WorkerError with its log's end.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

from pytest_gpuperf.errors import WorkerError

ENV_FD = "GPUPERF_WORKER_FD"
ENV_TIME_ONLY = "GPUPERF_WORKER_TIME_ONLY"  # "1": a confirmation worker, it only times
ENV_REFERENCE = "GPUPERF_WORKER_REFERENCE"  # "1": time the host's reference work beside each measurement
ENV_HARNESS = "GPUPERF_WORKER_HARNESS"  # a folder holding only a link to the head's pytest_gpuperf

RUN = "run"
ROUND = "round"
FINISH = "finish"
SKIP = "skip"
PROFILE = "profile"
QUIT = "quit"

HELLO = "hello"
MISSING = "missing"
READY = "ready"
SAMPLES = "samples"
FINISHED = "finished"
FAILED = "failed"
MEASUREMENTS = "measurements"
DONE = "done"
PROFILED = "profiled"

# Pause before handing the machine to the other process: OpenMP worker threads spin for milliseconds
# after a parallel region, and two processes' spinning pools on the same cores slow the measuring side
# by orders of magnitude. A process with one intra-op thread has no pool to spin, and skips the pause.
HANDOVER_S = 0.02
_POLL_SLICE_S = 0.25
_LOG_TAIL_LINES = 30
_STACK_DUMP_WAIT_S = 3.0  # at most, for a silent worker to write its stacks into its log before the head reads it
_STACK_LINES = 12  # of those stacks, the innermost frames: where it hangs

Message = tuple[Any, ...]


def handover_pause_s() -> float:
    """How long this process waits after its round before the other side measures.

    The threads of a parallel round (torch's intra-op pool, numpy's BLAS) spin for a while after it;
    only torch says how many it runs, so a suite that has not loaded torch waits as for several.
    """
    torch = sys.modules.get("torch")
    return HANDOVER_S if torch is None or torch.get_num_threads() > 1 else 0.0


def harness() -> dict[str, str]:
    """The pytest-gpuperf this process runs: its version and its package's folder (links resolved)."""
    import pytest_gpuperf

    return {"version": pytest_gpuperf.__version__, "location": str(Path(pytest_gpuperf.__file__).resolve().parent)}


def log_tail(path: Path | None) -> str:
    """The end of the worker's log, for error messages."""
    if path is None or not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:])


class WorkerProcess(Protocol):
    """What the head uses of a worker's process: a ``subprocess.Popen``, or a forked one (twins.py)."""

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def terminate(self) -> None: ...

    def dump_stacks(self) -> None:
        """Have the worker write its threads' Python stacks into its log (SIGUSR1, twins.py)."""

    def kill(self) -> None: ...


def reap(process: WorkerProcess | subprocess.Popen[bytes], grace_s: float = 10.0) -> int:
    """Wait up to ``grace_s`` for ``process`` to end, then kill it; its exit code."""
    try:
        return process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


class HeadChannel:
    """The head's end: sends commands, receives replies with a timeout, watches the process."""

    def __init__(self, conn: Connection, process: WorkerProcess, log_path: Path | None) -> None:
        self.conn = conn
        self.process = process
        self.log_path = log_path
        self._lost = ""  # why the channel failed once (the worker exited, closed it or fell silent): it stays so

    def send(self, kind: str, *payload: Any) -> None:
        try:
            self.conn.send((kind, *payload))
        except (OSError, EOFError, BrokenPipeError) as exc:
            raise self._error(f"could not send {kind!r} to the worker ({exc})") from None

    def recv(self, timeout_s: float, waiting_for: str) -> Message:
        """The next message; WorkerError if the worker exits, closes the pipe or stays silent."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.conn.poll(_POLL_SLICE_S):
                    message: Message = self.conn.recv()
                    return message
            except (EOFError, OSError):
                raise self._error(f"{self._exit_text()} while the head waited for {waiting_for}") from None
            if self.process.poll() is not None:
                raise self._error(
                    f"the worker exited with code {self.process.returncode} while the head waited for {waiting_for}"
                )
            if time.monotonic() > deadline:
                tail, stuck = log_tail(self.log_path), self._stacks()  # the log as it was, then where it is stuck
                raise self._error(f"no answer from the worker within {timeout_s:g}s while waiting for {waiting_for}",
                                  tail=tail, stuck=stuck)  # fmt: skip

    def ended(self, before: str) -> WorkerError | None:
        """The error to raise, naming what it stops (``before``), if the worker has already exited; else None.

        Checked before each new test, so that every later test says that it could not run, under its
        own name, and does not wait for the test that was running when the worker died.
        """
        code = self.process.poll()
        if code is not None:
            return self._error(f"the worker exited with code {code} before {before}")
        return self._error(f"the worker failed earlier ({self._lost}) before {before}") if self._lost else None

    def _stacks(self) -> str:
        """Where a silent worker is stuck (a test module hanging at import, say): its innermost frames.

        The worker writes its stacks into its log on request, most recent call first; what it appends is read back.
        """
        if self.log_path is None:
            return ""
        before = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.process.dump_stacks()
        deadline, size = time.monotonic() + _STACK_DUMP_WAIT_S, before
        while time.monotonic() < deadline:  # until the worker's handler has written them (the log stops growing)
            time.sleep(0.1)
            now = self.log_path.stat().st_size if self.log_path.exists() else 0
            if size > before and now == size:
                break
            size = now
        with contextlib.suppress(OSError), self.log_path.open("rb") as log:
            log.seek(before)
            return "\n".join(log.read().decode(errors="replace").splitlines()[:_STACK_LINES])
        return ""

    def _exit_text(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the worker closed the connection"
        return f"the worker exited with code {code}"

    def _error(self, message: str, *, tail: str | None = None, stuck: str = "") -> WorkerError:
        """The error with the end of the worker's log, and where it was stuck: the log goes with the session."""
        self._lost = self._lost or message
        tail = log_tail(self.log_path) if tail is None else tail
        # No path to the log: its folder is removed with the session's worktree, so what it says is carried here.
        text = f"--gpuperf-compare-ref worker: {message}" + (f"\nthe end of its log:\n{tail}" if tail else "")
        return WorkerError(text + (f"\nwhere the worker was, most recent call first:\n{stuck}" if stuck else ""))


class WorkerChannel:
    """The worker's end: blocking receives (the head drives; its exit closes the pipe)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @classmethod
    def from_environment(cls) -> WorkerChannel:
        raw = os.environ.get(ENV_FD)
        if not raw or not raw.isdigit():
            raise WorkerError(
                f"pytest_gpuperf.workers.worker_plugin is started by --gpuperf-compare-ref only ({ENV_FD} is not set)"
            )
        return cls(Connection(int(raw)))

    def send(self, kind: str, *payload: Any) -> None:
        self.conn.send((kind, *payload))

    def recv(self) -> Message:
        message: Message = self.conn.recv()
        return message
