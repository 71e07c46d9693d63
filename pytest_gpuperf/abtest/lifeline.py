"""A worker process ends when the process that started it ends.

A head killed outright (SIGKILL, an out-of-memory kill, a CI job cancelled)
closes its end of the pipe, but a worker busy in a warm-up, a round or its
collection reads the pipe only when that is over: it would go on spinning a
core for seconds to minutes. On Linux the kernel sends the worker SIGKILL when
its parent dies (``prctl(PR_SET_PDEATHSIG)``, through ctypes: the standard
library has no wrapper); elsewhere a daemon thread watches the parent's pid
once a second. Either way a parent that died before the worker could arm it
is caught by comparing the pid it was given with ``os.getppid()``.

Nothing a dead head left can be reported to, and the worker owns nothing that
needs a clean exit (its scratch folder belongs to the head), so the end is
immediate. The worker's own children (DDP ranks) are not covered: they are
reached through the worker's exit like any child of a killed process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

ENV_PARENT = "GPUPERF_WORKER_PARENT"  # the head's pid, set by remote.launch_worker
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_WATCH_INTERVAL_S = 1.0


def parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent ends; False where it cannot (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_WATCH_INTERVAL_S)
    os._exit(1)


def die_with_parent(parent: int | None = None) -> None:
    """End this process when ``parent`` (default: the pid in ``GPUPERF_WORKER_PARENT``) ends.

    Does nothing when no parent is named (a worker started by hand).
    """
    if parent is None:
        raw = os.environ.get(ENV_PARENT, "")
        if not raw.isdigit():
            return
        parent = int(raw)
    if not parent_death_signal():
        threading.Thread(target=_watch, args=(parent,), name="gpuperf-lifeline", daemon=True).start()
    if os.getppid() != parent:  # the parent ended before the signal was armed
        os._exit(1)
