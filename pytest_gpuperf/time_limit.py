"""The hard stop at a measurement's time limit, for a call that never returns.

``hard_limit(deadline, timeout)`` guards the calls of a measurement (its warm-up,
its rounds, the CPU memory probe). On POSIX, on the main thread, a real-time
interval timer (``signal.setitimer(ITIMER_REAL)``) raises the ``timeout()``
error inside the running call once the deadline passes, as pytest-timeout's
"signal" method does. A SIGALRM handler and timer that were set before (that
method's own) are put back afterwards, less the time spent; one due before the
deadline still fires, through its own handler.

Python runs signal handlers between bytecodes only: a call stuck in C code (a
CUDA synchronize, a native library waiting on a lock) is interrupted when
control returns to Python, not before. Elsewhere (another thread, Windows) no
timer can interrupt the call: the deadline is checked between calls instead,
so a hung call is reported once it returns. Either way a call that ends past
the deadline fails the measurement: the planning in stopping.py starts no
call that it expects to end there.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

Timeout = Callable[[], BaseException]


def signals_usable() -> bool:
    """True where a SIGALRM timer can interrupt a call: POSIX, on the main thread."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def check_deadline(deadline: float, timeout: Timeout) -> None:
    """Raise ``timeout()`` if the ``time.perf_counter`` deadline has passed."""
    if time.perf_counter() >= deadline:
        raise timeout()


@contextlib.contextmanager
def hard_limit(deadline: float, timeout: Timeout) -> Iterator[None]:
    """Run the body with ``deadline`` (``time.perf_counter`` seconds) as a hard stop."""
    check_deadline(deadline, timeout)
    if not signals_usable():
        yield
        check_deadline(deadline, timeout)
        return
    with _alarm(deadline, timeout):
        yield
    check_deadline(deadline, timeout)


@contextlib.contextmanager
def _alarm(deadline: float, timeout: Timeout) -> Iterator[None]:
    previous_handler = signal.getsignal(signal.SIGALRM)
    previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, 0)
    started = time.perf_counter()
    outer_due = started + previous_delay if previous_delay > 0 else None

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        nonlocal outer_due
        now = time.perf_counter()
        if now >= deadline:
            raise timeout()
        if outer_due is not None and now >= outer_due:
            outer_due = None  # the outer timer's turn: its handler decides, then ours is re-armed
            if callable(previous_handler):
                previous_handler(signum, frame)
        signal.setitimer(signal.ITIMER_REAL, _next_delay(deadline, outer_due))

    signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, _next_delay(deadline, outer_due))
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, _as_handler(previous_handler))
        if outer_due is not None:  # not fired yet: what is left of it, at once if due already
            left = outer_due - time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), previous_interval)
        elif previous_delay > 0 and previous_interval > 0:  # fired here; it repeats
            signal.setitimer(signal.ITIMER_REAL, previous_interval, previous_interval)


def _next_delay(deadline: float, outer_due: float | None) -> float:
    due = deadline if outer_due is None else min(deadline, outer_due)
    return max(due - time.perf_counter(), 1e-6)


def _as_handler(handler: Any) -> Any:
    """``signal.getsignal`` answers None for a handler not set from Python; the default then."""
    return signal.SIG_DFL if handler is None else handler
