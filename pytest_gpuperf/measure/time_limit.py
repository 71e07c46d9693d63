"""The hard stop at a measurement's time limit, for a call that never returns.

On POSIX, on the main thread, an ``ITIMER_REAL`` timer raises ``timeout()`` inside the
running call at the deadline, as pytest-timeout's "signal" method does, and puts back a
SIGALRM timer set before (one due first still fires). C code is interrupted only when
control returns to Python. Elsewhere the deadline is checked between calls instead.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

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
    with _alarm(deadline, timeout) if signals_usable() else contextlib.nullcontext():
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
        # getsignal answers None for a handler not set from Python: the default then
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous_handler is None else previous_handler)
        if outer_due is not None:  # not fired yet: what is left of it, at once if due already
            left = outer_due - time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), previous_interval)
        elif previous_delay > 0 and previous_interval > 0:  # fired here; it repeats
            signal.setitimer(signal.ITIMER_REAL, previous_interval, previous_interval)


def _next_delay(deadline: float, outer_due: float | None) -> float:
    due = deadline if outer_due is None else min(deadline, outer_due)
    return max(due - time.perf_counter(), 1e-6)
