"""A worker process ends when the process that started it ends.

A worker busy in a warm-up, a round or its collection would not notice its head's death for minutes.
On Linux the kernel kills it (``prctl(PR_SET_PDEATHSIG)``, through ctypes); elsewhere a daemon thread
watches the parent's pid. The worker owns nothing that needs a clean exit.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

ENV_PARENT = "GPUPERF_WORKER_PARENT"  # the parent's pid, set by remote.worker_environment
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
    """End this process when ``parent`` (default: the pid in ``GPUPERF_WORKER_PARENT``, if any) ends."""
    if parent is None:
        raw = os.environ.get(ENV_PARENT, "")
        if not raw.isdigit():
            return
        parent = int(raw)
    if not parent_death_signal():
        threading.Thread(target=_watch, args=(parent,), name="gpuperf-lifeline", daemon=True).start()
    if os.getppid() != parent:  # the parent ended before the signal was armed
        os._exit(1)
