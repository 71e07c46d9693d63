"""How the pytest layer fails a test with one of its own messages: once, without a traceback.

Raised ``from None``: chained to an exception being handled, pytest prints the message twice.
"""

from __future__ import annotations

from typing import NoReturn

import pytest

from pytest_gpuperf.errors import BaseStartError, GpuperfError

MARKER_PROBLEM_KEY = pytest.StashKey[str]()  # what a test's markers get wrong, found at collection


def marker_problem(item: pytest.Item, message: str) -> None:
    """Keep what a test's marker (``gpuperf`` or ``benchmark``) gets wrong: that test fails alone, at its setup.

    The other tests of its file and session still run: one typo in a marker does not hold the suite back.
    """
    previous = item.stash.get(MARKER_PROBLEM_KEY, None)
    item.stash[MARKER_PROBLEM_KEY] = f"{previous}; {message}" if previous else message


def fail_on_marker_problem(item: pytest.Item) -> None:
    """At the test's setup, before any of its fixtures: fail it for what :func:`marker_problem` kept."""
    __tracebackhide__ = True
    problem = item.stash.get(MARKER_PROBLEM_KEY, None)
    if problem is not None:
        fail(problem)


def fail(message: str) -> NoReturn:
    """Fail the running test with ``message`` alone: no traceback, no chained exception."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None


def fail_on(exc: GpuperfError) -> NoReturn:
    """Fail the running test for ``exc``; an error no test of the session could pass ends the session instead.

    compare-ref's base worker that could not start is one: every test would fail alike, for a reason that
    is no regression, so the run stops with that one message and pytest's usage-error exit code (4).
    """
    __tracebackhide__ = True
    if isinstance(exc, BaseStartError):
        pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
    fail(str(exc))
