"""How the pytest layer fails a test with one of its own messages: once, without a traceback.

``pytest.fail`` called while an exception is being handled chains to it, and pytest
then prints the message twice, joined by "During handling of the above exception,
another exception occurred". Our errors already say what is wrong and where, so
the failure carries no context (``raise ... from None``).
"""

from __future__ import annotations

from typing import NoReturn

import pytest


def fail(message: str) -> NoReturn:
    """Fail the running test with ``message`` alone: no traceback, no chained exception."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None
