"""Keep the profiler's start/stop chatter out of a test's captured stderr, and torch's warnings warnings.

Kineto writes lines such as ``USDT:... SyncActivityProfilerHandler.cpp:52] profiler_start`` straight
to fd 2, and no setting turns them off (``KINETO_LOG_LEVEL`` leaves these), so a profiled failure
would show them under "Captured stderr". fd 2 is pointed at a temporary file for the profiled
block; afterwards every other line is written back, in order.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator

# "USDT:" or "STAGE:", a date and time, pid:tid, a C++ source file and line, then "]"; and c10's
# warning (``[W1207 21:32:31.687 CPUAllocator.cpp:245] Memory block of unknown size ...``) when a
# tensor allocated before a memory profile started is freed during it: torch writes it to fd 2 from
# the deallocation, outside any Python call, so no warnings filter reaches it. It says only that the
# profile cannot see that free, which a peak of the call's own allocations does not need.
CHATTER = re.compile(
    rb"^(?:(?:USDT|STAGE):\S+ \S+ \d+:\d+ \S+\.cpp:\d+\] .*"
    rb"|\[W\S* \S+ CPUAllocator\.cpp:\d+\] Memory block of unknown size was allocated before the profiling "
    rb"started.*)$"
)


def without_chatter(text: bytes) -> bytes:
    """``text`` less the profiler's own lines."""
    return b"".join(line for line in text.splitlines(keepends=True) if not CHATTER.match(line.rstrip(b"\r\n")))


@contextlib.contextmanager
def quiet_profiler(fd: int = 2) -> Iterator[None]:
    """Inside, what reaches ``fd`` is held back; after, all of it but the profiler's chatter is written to ``fd``."""
    try:
        sys.stderr.flush()
        saved = os.dup(fd)
    except (OSError, ValueError):  # no such descriptor: nothing to keep clean
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), fd)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            held.seek(0)
            rest = without_chatter(held.read())
            while rest:
                rest = rest[os.write(fd, rest) :]


# Modules whose warnings are torch's own: dynamo and inductor warn from inside a compile.
TORCH_MODULES = r"torch(\.|$)"


@contextlib.contextmanager
def torch_warnings_stay_warnings() -> Iterator[None]:
    """Inside, a warning torch's own code issues is shown, never raised, whatever the filters say.

    A profile pass may trace a compiled function again, and dynamo reads attributes that warn
    (``.grad`` of a non-leaf); under ``filterwarnings = error`` that would lose the profile.
    Filters for other modules, the user's code included, are left as they are.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("default", module=TORCH_MODULES)
        yield
