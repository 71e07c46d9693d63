"""Compare-ref's workers, forked from one parent per session that imported torch once.

A worker's start-up is mostly importing torch. The session's zygote imports the head's harness,
pytest and torch, nothing of either checkout, and forks workers when the head asks: the base
worker that measures the first pair beside the head, then each fresh pair's two workers. One
import for every worker of the session, and both sides of a fresh pair start from one process
image, so what a process inherits (where libraries were mapped, what the imports left on the
heap) is alike on both sides. What sets processes apart arises after the fork (their physical
pages, what each collects and allocates) and shows up as the spread between pairs
(docs/statistics.md). The zygote forks only while it runs one thread and has not initialised CUDA
(``unsafe_to_fork``), reports its workers' exits, and ends with the head (``lifeline``), its
workers with it.

Over the zygote's socket pair (``GPUPERF_ZYGOTE_FD``): head -> zygote FORK request [spec, ...],
then each worker's end of its channel (``multiprocessing.reduction.send_handle``); zygote -> head
FORKED request [pid, ...], then EXITED pid code as each worker ends. A zygote that refuses exits 1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recv_handle, send_handle
from pathlib import Path
from typing import Any, NoReturn

from pytest_gpuperf.abtest import lifeline, protocol
from pytest_gpuperf.abtest.protocol import HeadChannel
from pytest_gpuperf.abtest.remote import (
    HARNESS_FIRST,
    WorkerLaunch,
    channel_environment,
    head_harness_dir,
    worker_argv,
    worker_environment,
)
from pytest_gpuperf.errors import WorkerError

ENV_ZYGOTE_FD = "GPUPERF_ZYGOTE_FD"

FORK = "fork"
FORKED = "forked"
EXITED = "exited"

_WAIT_SLICE_S = 0.05

# What the zygote runs (``python -c``): the head's harness first, as a worker (remote.HARNESS_FIRST).
_ZYGOTE = f"""{HARNESS_FIRST}
import pytest_gpuperf.abtest.twins
pytest_gpuperf.abtest.twins.zygote_main()
"""


class ForkedWorker:
    """A worker forked by the zygote, as the head watches it: the part of ``subprocess.Popen`` it uses."""

    def __init__(self, zygote: Zygote, request: int, index: int) -> None:
        self._zygote = zygote
        self._request = request
        self._index = index

    @property
    def returncode(self) -> int | None:
        return self._zygote.code_of(self._request, self._index)

    def poll(self) -> int | None:
        self._zygote.collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"confirmation worker {self._request}.{self._index}", timeout or 0.0)
            self._zygote.collect(_WAIT_SLICE_S)
        return code

    def terminate(self) -> None:
        self._zygote.signal(self._request, self._index, signal.SIGTERM)

    def kill(self) -> None:
        self._zygote.signal(self._request, self._index, signal.SIGKILL)


class Zygote:
    """The head's handle on the session's zygote: its process, its control connection, what it reported."""

    def __init__(self, process: subprocess.Popen[bytes], conn: Connection, scratch: Path) -> None:
        self.process = process
        self.conn = conn
        self.scratch = scratch  # its log and the harness link live here
        self.pids: dict[int, list[int]] = {}  # request -> the pids it forked
        self.codes: dict[int, int] = {}  # pid -> exit code
        self._requests = 0

    @classmethod
    def start(cls, scratch: Path) -> Zygote:
        """Start a zygote in ``scratch``; returns at once, while it imports torch."""
        control, zygote_end = Pipe(duplex=True)
        env = worker_environment(head_harness_dir(scratch), ())
        env[ENV_ZYGOTE_FD] = str(zygote_end.fileno())
        try:
            scratch.mkdir(parents=True, exist_ok=True)
            with open(scratch / "zygote.log", "wb") as log:
                process = subprocess.Popen(
                    [sys.executable, "-c", _ZYGOTE], cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT,
                    pass_fds=(zygote_end.fileno(),),
                )  # fmt: skip
        except OSError as exc:
            control.close()
            raise WorkerError(f"could not start the workers' parent process in {scratch}: {exc}") from exc
        finally:
            zygote_end.close()
        return cls(process, control, scratch)

    def running(self) -> bool:
        self.collect()
        return self.process.poll() is None

    def fork(self, *launches: WorkerLaunch) -> list[HeadChannel]:
        """Ask for a worker for each of ``launches``, forked in turn; their channels, at once.

        Each worker answers HELLO on its channel once it has collected its tests, as
        ``remote.spawn_worker``'s does.
        """
        check_folders(launches)
        harness = head_harness_dir(self.scratch)
        specs = [  # what each forked worker needs to become the worker remote.spawn_worker would start
            {
                "cwd": str(launch.cwd), "path_prefix": [str(harness), str(launch.cwd), *map(str, launch.import_roots)],
                "env": worker_environment(harness, launch.import_roots), "time_only": launch.time_only,
                "log": str(launch.log_path), "argv": worker_argv(launch),
            }
            for launch in launches
        ]  # fmt: skip
        for launch in launches:
            launch.log_path.parent.mkdir(parents=True, exist_ok=True)
        ends = [Pipe(duplex=True) for _ in specs]
        self._requests += 1
        request = self._requests
        try:
            self.conn.send((FORK, request, specs))
            for _, worker_end in ends:
                send_handle(self.conn, worker_end.fileno(), self.process.pid)
        except OSError as exc:
            for head_end, _ in ends:
                head_end.close()
            log = self.scratch / "zygote.log"
            raise WorkerError(f"the workers' parent process is gone ({exc}); its log: {log}") from None
        finally:
            for _, worker_end in ends:
                worker_end.close()
        return [
            HeadChannel(head_end, ForkedWorker(self, request, i), launch.log_path)
            for i, ((head_end, _), launch) in enumerate(zip(ends, launches, strict=True))
        ]

    def pid_of(self, request: int, index: int) -> int | None:
        pids = self.pids.get(request, [])
        return pids[index] if index < len(pids) else None

    def code_of(self, request: int, index: int) -> int | None:
        pid = self.pid_of(request, index)
        if pid is not None:
            return self.codes.get(pid)
        # not forked (yet): the zygote's own end is the worker's
        return None if self.process.poll() is None else (self.process.returncode or 1)

    def collect(self, timeout_s: float = 0.0) -> None:
        """Read what the zygote reported; a zygote that is gone takes its unreported workers with it."""
        try:
            while self.conn.poll(timeout_s):
                timeout_s = 0.0
                message = self.conn.recv()
                if message[0] == FORKED:
                    self.pids[int(message[1])] = [int(p) for p in message[2]]
                elif message[0] == EXITED:
                    self.codes[int(message[1])] = int(message[2])
        except (EOFError, OSError):
            self._gone()

    def _gone(self) -> None:
        code = protocol.reap(self.process)
        for pids in self.pids.values():
            for pid in pids:
                if pid not in self.codes:  # its parent-death signal ends it (lifeline)
                    self.codes[pid] = -signal.SIGKILL if code == 0 else code

    def signal(self, request: int, index: int, sig: int) -> None:
        pid = self.pid_of(request, index)
        if pid is None:  # not forked yet: end the zygote, which ends whatever it forks
            self.process.send_signal(sig)
            return
        if pid not in self.codes:  # unreaped until the zygote reports it, so the pid is still this worker's
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def close(self) -> None:
        """End the zygote (its workers with it, if any still run); never raises."""
        with contextlib.suppress(OSError):
            self.conn.close()
        with contextlib.suppress(Exception):
            protocol.reap(self.process)


class SessionZygote:
    """A compare-ref session's zygote: started on first use (or early, by prestart.py), again if it ended."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self._zygote: Zygote | None = None

    def running(self) -> Zygote:
        """The zygote, started now if there is none or the last one ended; WorkerError if it cannot start."""
        if self._zygote is not None and not self._zygote.running():
            self._zygote.close()
            self._zygote = None
        if self._zygote is None:
            self._zygote = Zygote.start(self.scratch)
        return self._zygote

    def fork(self, *launches: WorkerLaunch) -> list[HeadChannel]:
        check_folders(launches)  # before a zygote is started for nothing
        return self.running().fork(*launches)

    def close(self) -> None:
        """End the zygote and whatever it forked that still runs; never raises."""
        zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()


def check_folders(launches: Sequence[WorkerLaunch]) -> None:
    """WorkerError naming the first launch folder that does not exist: the fork would fail in the worker."""
    for launch in launches:
        if not launch.cwd.is_dir():
            raise WorkerError(f"could not start a worker in {launch.cwd}: no such folder")


def unsafe_to_fork() -> str | None:
    """Why this process must not fork a measuring worker, or None (module doc)."""
    import threading

    import torch

    if threading.active_count() > 1:
        return f"the zygote runs {threading.active_count()} threads"
    if torch.cuda.is_initialized():
        return "the zygote initialised CUDA"
    return None


def zygote_main() -> NoReturn:
    """The zygote: import what every worker imports, then fork the workers asked for and report their exits."""
    import pytest  # noqa: F401  (imported here once, for every worker)
    import torch  # noqa: F401

    import pytest_gpuperf.abtest.worker_plugin  # noqa: F401

    conn = Connection(int(os.environ[ENV_ZYGOTE_FD]))
    own_path = [p for p in sys.path if p not in (os.environ[protocol.ENV_HARNESS], os.getcwd())]
    # Blocked until the head asks or a worker ends (SIGCHLD, through the wakeup fd): a zygote that
    # polled would wake up throughout the measurements it waits beside.
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    try:
        while True:
            ready = wait([conn, woken])
            if woken in ready:
                os.read(woken, 512)
            if conn in ready:
                _, request, specs = conn.recv()
                fds = [recv_handle(conn) for _ in specs]
                conn.send((FORKED, request, _fork_workers(conn, specs, fds, own_path, (woken, wake))))
            _report_exits(conn)
    except (EOFError, OSError):
        os._exit(0)  # the head closed its end: the workers still running end with this process


def _fork_workers(
    conn: Connection, specs: list[dict[str, Any]], fds: list[int], own_path: list[str], wakeup: tuple[int, int]
) -> list[int]:
    why = unsafe_to_fork()
    if why is not None:
        print(f"pytest-gpuperf: not forking the confirmation pair's workers: {why}", flush=True)
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    pids = []
    for spec, fd in zip(specs, fds, strict=True):
        pid = os.fork()
        if pid == 0:
            conn.close()
            signal.set_wakeup_fd(-1)  # the worker's signals are its own (DDP ranks, subprocesses)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _become_worker(spec, fd, [*wakeup, *(other for other in fds if other != fd)], own_path)
        pids.append(pid)
    for fd in fds:
        os.close(fd)
    return pids


def _report_exits(conn: Connection) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # none forked, or all reported
        if pid == 0:
            return
        conn.send((EXITED, pid, os.waitstatus_to_exitcode(status)))


def _become_worker(spec: dict[str, Any], fd: int, others: list[int], inherited_path: list[str]) -> NoReturn:
    """In the forked child: become the worker ``spec`` describes, on channel ``fd``; run its pytest session, exit."""
    code = 1
    try:
        lifeline.die_with_parent(os.getppid())  # a fork does not inherit the parent-death signal
        for other in others:
            os.close(other)
        log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.chdir(spec["cwd"])
        os.environ.update(spec["env"])  # the launched worker's (remote.worker_environment); PYTHONPATH for DDP ranks
        os.environ.update(channel_environment(fd, time_only=spec["time_only"]))
        os.environ[lifeline.ENV_PARENT] = str(os.getppid())
        del os.environ[ENV_ZYGOTE_FD]
        sys.path[:] = [*spec["path_prefix"], *(p for p in inherited_path if p not in spec["path_prefix"])]
        import pytest

        code = int(pytest.main(list(spec["argv"])))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
