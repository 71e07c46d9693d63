"""How the pytest layer fails a test with one of its own messages: once, without a traceback.

Raised ``from None``: chained to an exception being handled, pytest prints the message twice.
"""

from __future__ import annotations

from typing import NoReturn

import pytest


def fail(message: str) -> NoReturn:
    """Fail the running test with ``message`` alone: no traceback, no chained exception."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None
