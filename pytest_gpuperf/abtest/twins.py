"""A confirmation pair's two workers, forked from one parent that imported torch once.

A worker's start-up is mostly importing torch. Each fresh pair has a short-lived parent (its
zygote) that imports the head's harness, pytest and torch, nothing of either checkout, and
forks the pair's two workers: one import per pair instead of two, and both sides start from
one process image, so what a process inherits (where libraries were mapped, what the imports
left on the heap) is alike within a pair and differs between pairs, where their spread sees it.
The zygote forks only while it runs one thread and has not initialised CUDA (``unsafe_to_fork``),
reports its workers' exits, and ends with them and with the head (``lifeline``).

Over the zygote's socket pair (``GPUPERF_ZYGOTE_FD``): head -> zygote FORK [spec, spec];
zygote -> head FORKED [pid, pid], then EXITED pid code for each. A zygote that refuses exits 1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import traceback
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from pytest_gpuperf.abtest import lifeline, protocol
from pytest_gpuperf.abtest.protocol import HeadChannel
from pytest_gpuperf.abtest.remote import HARNESS_FIRST, WorkerLaunch, head_harness_dir, worker_argv, worker_environment
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
    """A worker forked by a zygote, as the head watches it: the part of ``subprocess.Popen`` it uses."""

    def __init__(self, zygote: _Zygote, index: int) -> None:
        self._zygote = zygote
        self._index = index

    @property
    def returncode(self) -> int | None:
        return self._zygote.code_of(self._index)

    def poll(self) -> int | None:
        self._zygote.collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"confirmation worker {self._index}", timeout or 0.0)
            self._zygote.collect(_WAIT_SLICE_S)
        self._zygote.reap_if_done()
        return code

    def terminate(self) -> None:
        self._zygote.signal(self._index, signal.SIGTERM)

    def kill(self) -> None:
        self._zygote.signal(self._index, signal.SIGKILL)


class _Zygote:
    """The head's handle on one zygote: its process, its control connection, what it reported."""

    def __init__(self, process: subprocess.Popen[bytes], conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.pids: list[int] = []
        self.codes: dict[int, int] = {}  # pid -> exit code

    def pid_of(self, index: int) -> int | None:
        return self.pids[index] if index < len(self.pids) else None

    def code_of(self, index: int) -> int | None:
        pid = self.pid_of(index)
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
                    self.pids = [int(p) for p in message[1]]
                elif message[0] == EXITED:
                    self.codes[int(message[1])] = int(message[2])
        except (EOFError, OSError):
            self._gone()

    def _gone(self) -> None:
        code = self.process.wait(timeout=10)
        for pid in self.pids:
            if pid not in self.codes:  # its parent-death signal ends it (lifeline)
                self.codes[pid] = -signal.SIGKILL if code == 0 else code

    def signal(self, index: int, sig: int) -> None:
        pid = self.pid_of(index)
        if pid is None:  # not forked yet: end the zygote, which ends whatever it forks
            self.process.send_signal(sig)
            return
        if pid not in self.codes:  # unreaped until the zygote reports it, so the pid is still this worker's
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def reap_if_done(self) -> None:
        if self.pids and all(pid in self.codes for pid in self.pids):
            protocol.reap(self.process)
            self.conn.close()


def spawn_twins(first: WorkerLaunch, second: WorkerLaunch) -> tuple[HeadChannel, HeadChannel]:
    """Start a zygote that forks a worker for ``first`` and then one for ``second``; their channels.

    Returns at once: the zygote imports torch while the head goes on, and each worker answers
    HELLO on its channel once it has collected its tests, as ``remote.spawn_worker``'s does.
    """
    for launch in (first, second):
        if not launch.cwd.is_dir():  # the fork would fail in the worker; say it here, naming the folder
            raise WorkerError(f"could not start a worker in {launch.cwd}: no such folder")
    control, zygote_end = Pipe(duplex=True)
    ends = [Pipe(duplex=True) for _ in (first, second)]
    harness = head_harness_dir(first.log_path.parent)
    env = worker_environment(harness, ())
    env[ENV_ZYGOTE_FD] = str(zygote_end.fileno())
    specs = [  # what each forked worker needs to become the worker remote.spawn_worker would start
        {
            "cwd": str(launch.cwd), "path_prefix": [str(harness), str(launch.cwd), *map(str, launch.import_roots)],
            "env": worker_environment(harness, launch.import_roots, fd=worker_end.fileno(), time_only=launch.time_only),
            "fd": worker_end.fileno(), "log": str(launch.log_path), "argv": worker_argv(launch),
        }
        for launch, (_, worker_end) in zip((first, second), ends, strict=True)
    ]  # fmt: skip
    passed = (zygote_end.fileno(), *(worker_end.fileno() for _, worker_end in ends))
    try:
        for launch in (first, second):
            launch.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(first.log_path, "wb") as log:  # the zygote's output, then its first worker's
            process = subprocess.Popen(
                [sys.executable, "-c", _ZYGOTE], cwd=first.log_path.parent, env=env, stdout=log,
                stderr=subprocess.STDOUT, pass_fds=passed,
            )  # fmt: skip
    except OSError as exc:
        control.close()
        for head_end, _ in ends:
            head_end.close()
        raise WorkerError(f"could not start a confirmation pair in {first.log_path.parent}: {exc}") from exc
    finally:
        zygote_end.close()
        for _, worker_end in ends:
            worker_end.close()
    zygote = _Zygote(process, control)
    control.send((FORK, specs))
    first_channel, second_channel = (
        HeadChannel(head_end, ForkedWorker(zygote, i), launch.log_path)
        for i, ((head_end, _), launch) in enumerate(zip(ends, (first, second), strict=True))
    )
    return first_channel, second_channel


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
    """The zygote: import what every worker imports, fork the two workers, report their exits, end."""
    import pytest  # noqa: F401  (imported here once, for both workers)
    import torch  # noqa: F401

    import pytest_gpuperf.abtest.worker_plugin  # noqa: F401

    conn = Connection(int(os.environ[ENV_ZYGOTE_FD]))
    try:
        message = conn.recv()
    except EOFError:
        os._exit(0)  # the head ended without needing this pair
    specs: list[dict[str, Any]] = message[1]
    why = unsafe_to_fork()
    if why is not None:
        print(f"pytest-gpuperf: not forking the confirmation pair's workers: {why}", flush=True)
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    own_path = [p for p in sys.path if p not in (os.environ[protocol.ENV_HARNESS], os.getcwd())]
    pids = []
    for index, spec in enumerate(specs):
        pid = os.fork()
        if pid == 0:
            conn.close()
            _become_worker(spec, index, [s["fd"] for s in specs if s is not spec], own_path)
        pids.append(pid)
    for spec in specs:
        os.close(spec["fd"])
    conn.send((FORKED, pids))
    for _ in pids:
        pid, status = os.wait()
        conn.send((EXITED, pid, os.waitstatus_to_exitcode(status)))
    os._exit(0)


def _become_worker(spec: dict[str, Any], index: int, others: list[int], inherited_path: list[str]) -> NoReturn:
    """In the forked child: become the worker ``spec`` describes, run its pytest session, exit."""
    code = 1
    try:
        lifeline.die_with_parent(os.getppid())  # a fork does not inherit the parent-death signal
        for fd in others:
            os.close(fd)
        if index > 0:  # the first worker writes to the zygote's log, which is its own
            log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
        os.chdir(spec["cwd"])
        os.environ.update(spec["env"])  # the launched worker's (remote.worker_environment); PYTHONPATH for DDP ranks
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
