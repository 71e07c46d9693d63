"""The hard stop at a measurement's time limit (time_limit.py), with real signals and threads."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

import pytest

from pytest_gpuperf.measure.time_limit import hard_limit, signals_usable

posix_only = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="SIGALRM timers are POSIX only")


class Late(Exception):
    pass


@pytest.fixture
def clean_alarm() -> Iterator[None]:
    """Whatever a test arms, no timer or handler outlives it."""
    handler = signal.getsignal(signal.SIGALRM) if hasattr(signal, "SIGALRM") else None
    yield
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, handler if handler is not None else signal.SIG_DFL)


@posix_only
@pytest.mark.usefixtures("clean_alarm")
def test_a_call_running_at_the_deadline_is_interrupted_on_the_main_thread() -> None:
    assert signals_usable()
    finished = []
    with pytest.raises(Late), hard_limit(time.perf_counter() + 0.05, Late):
        time.sleep(30)
        finished.append(True)
    assert not finished  # interrupted, not checked after the call
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@posix_only
@pytest.mark.usefixtures("clean_alarm")
def test_the_previous_handler_and_timer_are_put_back() -> None:
    fired: list[int] = []

    def outer(signum: int, frame: FrameType | None) -> None:
        fired.append(signum)

    signal.signal(signal.SIGALRM, outer)
    signal.setitimer(signal.ITIMER_REAL, 50.0)
    with hard_limit(time.perf_counter() + 10.0, Late):
        assert signal.getsignal(signal.SIGALRM) is not outer
    assert signal.getsignal(signal.SIGALRM) is outer
    left, interval = signal.getitimer(signal.ITIMER_REAL)
    assert 0 < left <= 50.0 and interval == 0
    assert not fired


@posix_only
@pytest.mark.usefixtures("clean_alarm")
def test_a_previous_timer_due_first_still_fires_through_its_own_handler() -> None:
    fired: list[int] = []

    def outer(signum: int, frame: FrameType | None) -> None:
        fired.append(signum)

    signal.signal(signal.SIGALRM, outer)
    signal.setitimer(signal.ITIMER_REAL, 0.02)
    with hard_limit(time.perf_counter() + 10.0, Late):
        time.sleep(0.2)  # resumed after the outer handler returns (PEP 475)
    assert fired == [signal.SIGALRM]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # fired once, not re-armed
    assert signal.getsignal(signal.SIGALRM) is outer


def test_off_the_main_thread_the_deadline_is_checked_when_the_call_returns() -> None:
    outcome: list[object] = []

    def body() -> None:
        assert not signals_usable()
        try:
            with hard_limit(time.perf_counter() + 0.01, Late):
                time.sleep(0.1)
                outcome.append("returned")
        except Late as exc:
            outcome.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert outcome[0] == "returned" and isinstance(outcome[1], Late)


def test_a_deadline_already_past_raises_before_the_body() -> None:
    ran = []
    with pytest.raises(Late), hard_limit(time.perf_counter() - 1.0, Late):
        ran.append(True)
    assert not ran
