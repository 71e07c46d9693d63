"""Workers forked from one parent (a zygote) that imported torch once.

A worker's start-up is mostly importing torch. A zygote imports the head's harness, pytest and
torch, nothing of either checkout, and forks workers when the head asks: in compare-ref the base
worker that measures the first pair beside the head, then each fresh pair's two workers; in
baseline mode each fresh re-measure's worker (fresh.py). One import for every worker of a
session, and both sides of a fresh pair start from one process image, so what a process
inherits (where libraries were mapped, what the imports left on the heap) is alike on both
sides. What sets processes apart arises after the fork (their physical pages, what each
collects and allocates) and shows up as the spread between pairs (docs/statistics.md). The
zygote forks only while it runs one thread and has not initialised CUDA (``unsafe_to_fork``),
reports its workers' exits, and ends with the head (``lifeline``), its workers with it.

Over the zygote's socket pair (``GPUPERF_ZYGOTE_FD``): head -> zygote FORK [spec, ...], then
each worker's end of its channel (``multiprocessing.reduction.send_handle``); zygote -> head
FORKED [pid, ...], and EXITED pid code as each worker ends. A zygote that refuses exits 1.
"""

from __future__ import annotations

import contextlib
import faulthandler
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

from pytest_gpuperf.errors import WorkerError
from pytest_gpuperf.workers import lifeline, protocol
from pytest_gpuperf.workers.protocol import HeadChannel
from pytest_gpuperf.workers.remote import (
    START_TIMEOUT_S,
    WorkerLaunch,
    channel_environment,
    head_harness_dir,
    worker_argv,
    worker_environment,
)

ENV_ZYGOTE_FD = "GPUPERF_ZYGOTE_FD"

FORK = "fork"
FORKED = "forked"
EXITED = "exited"

_WAIT_SLICE_S = 0.05
STACKS_SIGNAL = signal.SIGUSR1  # a worker writes its Python stacks to its log (the head asks when it is silent)
_STACKS_FILE: Any = None  # in a worker: the log, open for faulthandler

# What the zygote runs (``python -c``). Written out here rather than imported from this package:
# the head's harness must come first on sys.path, ahead of the cwd that ``python -c`` puts there,
# before anything is imported; the plugin is imported before pytest puts folders of a checkout in
# front (the ``pythonpath`` ini).
_ZYGOTE = f"""
import os, sys
harness = os.environ[{protocol.ENV_HARNESS!r}]
sys.path[:] = [harness, *(os.getcwd() if p == "" else p for p in sys.path if p != harness)]
import pytest_gpuperf.workers.lifeline
pytest_gpuperf.workers.lifeline.die_with_parent()  # before the slow imports: a killed head ends this process
import pytest_gpuperf.workers.twins
pytest_gpuperf.workers.twins.zygote_main()
"""


class ForkedWorker:
    """A worker forked by the zygote, as the head watches it: the part of ``subprocess.Popen`` it uses."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self._zygote = zygote
        self.pid = pid

    @property
    def returncode(self) -> int | None:
        return self._zygote.codes.get(self.pid)

    def poll(self) -> int | None:
        self._zygote.collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout or 0.0)
            self._zygote.collect(_WAIT_SLICE_S)
        return code

    def terminate(self) -> None:
        self._zygote.signal(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        self._zygote.signal(self.pid, signal.SIGKILL)

    def dump_stacks(self) -> None:
        self._zygote.signal(self.pid, STACKS_SIGNAL)


class Zygote:
    """The head's handle on a session's zygote: started on first use (or early, by prestart.py), again if it ended."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch  # its log and the harness link live here
        self.process: subprocess.Popen[bytes] | None = None
        self.conn: Connection | None = None  # its control connection
        self.pids: list[int] = []  # every worker it forked
        self.codes: dict[int, int] = {}  # pid -> exit code

    def start(self) -> None:
        """Start the zygote unless it runs; returns at once, while it imports torch."""
        if self.running():
            return
        control, zygote_end = Pipe(duplex=True)
        env = worker_environment(head_harness_dir(self.scratch), ())
        env[ENV_ZYGOTE_FD] = str(zygote_end.fileno())
        try:
            self.scratch.mkdir(parents=True, exist_ok=True)
            with open(self.scratch / "zygote.log", "wb") as log:
                self.process = subprocess.Popen(
                    [sys.executable, "-c", _ZYGOTE], cwd=self.scratch, env=env, stdout=log,
                    stderr=subprocess.STDOUT, pass_fds=(zygote_end.fileno(),),
                )  # fmt: skip
        except OSError as exc:
            control.close()
            raise WorkerError(f"could not start the workers' parent process in {self.scratch}: {exc}") from exc
        finally:
            zygote_end.close()
        self.conn = control

    def running(self) -> bool:
        self.collect()
        return self.process is not None and self.process.poll() is None

    def fork(self, *launches: WorkerLaunch) -> list[HeadChannel]:
        """A worker for each of ``launches``, forked in turn; their channels, once forked.

        Waits while the zygote is still importing torch; each worker answers HELLO on its
        channel once it has collected its tests.
        """
        check_folders(launches)  # before a zygote is started for nothing
        self.start()
        assert self.conn is not None and self.process is not None
        harness = head_harness_dir(self.scratch)
        specs = [  # what each forked worker needs to become its launch's worker
            {
                "cwd": str(launch.cwd), "path_prefix": [str(harness), str(launch.cwd), *map(str, launch.import_roots)],
                "env": worker_environment(harness, launch.import_roots), "time_only": launch.time_only,
                "reference": launch.reference,
                "log": str(launch.log_path), "argv": worker_argv(launch),
            }
            for launch in launches
        ]  # fmt: skip
        for launch in launches:
            launch.log_path.parent.mkdir(parents=True, exist_ok=True)
        ends = [Pipe(duplex=True) for _ in specs]
        try:
            self.conn.send((FORK, specs))
            for _, worker_end in ends:
                send_handle(self.conn, worker_end.fileno(), self.process.pid)
            pids = self._forked(self.process, self.conn)
        except (OSError, EOFError, WorkerError) as exc:
            for head_end, _ in ends:
                head_end.close()
            self.collect()  # reaps a zygote that ended
            log = self.scratch / "zygote.log"
            raise WorkerError(f"the workers' parent process forked none ({exc}); its log: {log}") from None
        finally:
            for _, worker_end in ends:
                worker_end.close()
        self.pids += pids
        return [
            HeadChannel(head_end, ForkedWorker(self, pid), launch.log_path)
            for (head_end, _), launch, pid in zip(ends, launches, pids, strict=True)
        ]

    def _forked(self, process: subprocess.Popen[bytes], conn: Connection) -> list[int]:
        """The pids of the FORKED reply, the exits reported before it noted."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if conn.poll(_WAIT_SLICE_S):
                message = conn.recv()
                if message[0] == FORKED:
                    return [int(p) for p in message[1]]
                self.codes[int(message[1])] = int(message[2])
            elif process.poll() is not None:
                raise WorkerError(f"exit code {process.returncode}")
        raise WorkerError(f"no workers forked within {START_TIMEOUT_S:g} s")

    def collect(self, timeout_s: float = 0.0) -> None:
        """Read the exits the zygote reported; a zygote that is gone takes its unreported workers with it."""
        if self.conn is None or self.process is None:
            return
        try:
            while self.conn.poll(timeout_s):
                timeout_s = 0.0
                _, pid, code = self.conn.recv()
                self.codes[int(pid)] = int(code)
        except (EOFError, OSError):
            code = protocol.reap(self.process)
            for pid in self.pids:
                if pid not in self.codes:  # its parent-death signal ends it (lifeline)
                    self.codes[pid] = -signal.SIGKILL if code == 0 else code

    def signal(self, pid: int, sig: int) -> None:
        if pid not in self.codes:  # unreaped until the zygote reports it, so the pid is still this worker's
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def close(self) -> None:
        """End the zygote, its workers with it if any still run; never raises. A later fork starts it anew."""
        conn, process, self.conn, self.process = self.conn, self.process, None, None
        with contextlib.suppress(Exception):
            if conn is not None:
                conn.close()
            if process is not None:
                protocol.reap(process)


def check_folders(launches: Sequence[WorkerLaunch]) -> None:
    """WorkerError naming the first launch folder that does not exist: the fork would fail in the worker."""
    for launch in launches:
        if not launch.cwd.is_dir():
            raise WorkerError(f"could not start a worker in {launch.cwd}: no such folder")


def unsafe_to_fork() -> str | None:
    """Why this process must not fork a measuring worker, or None (module doc)."""
    import threading

    torch = sys.modules.get("torch")  # a zygote without torch (torch_support.py) has no CUDA to have started
    if threading.active_count() > 1:
        return f"the zygote runs {threading.active_count()} threads"
    if torch is not None and torch.cuda.is_initialized():
        return "the zygote initialised CUDA"
    return None


def zygote_main() -> NoReturn:
    """The zygote: import what every worker imports, then fork the workers asked for and report their exits."""
    import pytest  # noqa: F401  (imported here once, for every worker)

    import pytest_gpuperf.workers.worker_plugin  # noqa: F401
    from pytest_gpuperf.torch_support import have_torch

    if have_torch():
        import torch  # noqa: F401

    preload_plugins()
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
                _, specs = conn.recv()
                fds = [recv_handle(conn) for _ in specs]
                conn.send((FORKED, _fork_workers(conn, specs, fds, own_path, (woken, wake))))
            _report_exits(conn)
    except (EOFError, OSError):
        os._exit(0)  # the head closed its end: the workers still running end with this process


ENV_NO_PRELOAD = "GPUPERF_ZYGOTE_NO_PRELOAD"  # set when a preloaded plugin left the zygote unsafe to fork
_PRELOADED: frozenset[str] = frozenset()  # the top-level packages preloading imported (pytest_gpuperf aside)


def preload_plugins() -> None:
    """Import the pytest plugins every worker's pytest loads (this package's and those installed), once for all.

    A worker's own start-up is pytest loading its plugins: finding their entry points, importing them (and,
    where bytecode is not written, compiling them and rewriting their asserts) takes seconds in each of a
    confirmation's workers where the zygote has not done it for them (docs/detection.md). A plugin whose
    import starts a thread or CUDA would leave the zygote unable to fork (``unsafe_to_fork``): the zygote then
    starts itself again without preloading, paying one more import of torch. A plugin that fails to import is
    left to fail in the worker, which reports it. Off where pytest's own autoload is (the workers load none).
    """
    global _PRELOADED
    if os.environ.get(ENV_NO_PRELOAD):
        return
    import importlib
    from importlib.metadata import entry_points

    before = set(sys.modules)
    importlib.import_module("pytest_gpuperf.plugin")
    if not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        for entry in entry_points(group="pytest11"):
            with contextlib.suppress(Exception):
                entry.load()
    _PRELOADED = frozenset(name.partition(".")[0] for name in set(sys.modules) - before) - {"pytest_gpuperf"}
    if unsafe_to_fork() is not None:
        sys.stdout.flush()
        os.environ[ENV_NO_PRELOAD] = "1"
        os.execv(sys.executable, [sys.executable, "-c", _ZYGOTE])


def _fork_workers(
    conn: Connection, specs: list[dict[str, Any]], fds: list[int], own_path: list[str], wakeup: tuple[int, int]
) -> list[int]:
    why = unsafe_to_fork()
    if why is not None:
        print(f"pytest-gpuperf: not forking workers: {why}", flush=True)
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


def _dump_stacks_on_signal(log: str) -> None:
    """On ``STACKS_SIGNAL``, write every thread's Python stack to the log (the head asks when the worker is silent).

    Through a descriptor of its own: pytest's capture takes over descriptor 2 while it collects.
    """
    global _STACKS_FILE
    _STACKS_FILE = open(log, "a", encoding="utf-8")  # noqa: SIM115  (open for the process's life)
    faulthandler.register(STACKS_SIGNAL, file=_STACKS_FILE, all_threads=True)


def forget_shadowed(folders: Sequence[str], preloaded: frozenset[str] | None = None) -> list[str]:
    """Forget the preloaded packages that the worker's import path (``folders``, first) resolves elsewhere than
    where the zygote found them, so that it imports those: a repository whose own pytest plugin the zygote
    preloaded is measured on its checkout's code, not on the installed one. A folder that holds the very copy
    preloaded (site-packages on a fresh re-measure's path) changes nothing. Returns the packages forgotten."""
    names = _PRELOADED if preloaded is None else preloaded
    shadowed = sorted(name for name in names if _resolves_elsewhere(name, folders))
    for module in [m for m in sys.modules if m.partition(".")[0] in shadowed]:
        del sys.modules[module]
    return shadowed


def _resolves_elsewhere(name: str, folders: Sequence[str]) -> bool:
    """Whether the first of ``folders`` that provides top-level module ``name`` is not the one it was loaded from."""
    file = getattr(sys.modules.get(name), "__file__", None)
    if file is None:
        return False  # a built-in or namespace package: nothing a checkout's folder would replace
    loaded = Path(file).parent.parent if Path(file).name == "__init__.py" else Path(file).parent
    for folder in folders:
        if Path(folder, name).is_dir() or Path(folder, f"{name}.py").is_file():
            return Path(folder).resolve() != loaded.resolve()
    return False


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
        _dump_stacks_on_signal(spec["log"])
        os.chdir(spec["cwd"])
        os.environ.update(spec["env"])  # remote.worker_environment's; PYTHONPATH for DDP ranks
        os.environ.update(channel_environment(fd, time_only=spec["time_only"], reference=spec["reference"]))
        os.environ[lifeline.ENV_PARENT] = str(os.getppid())
        del os.environ[ENV_ZYGOTE_FD]
        sys.path[:] = [*spec["path_prefix"], *(p for p in inherited_path if p not in spec["path_prefix"])]
        forget_shadowed(spec["path_prefix"][1:])
        import pytest

        code = int(pytest.main(list(spec["argv"])))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
