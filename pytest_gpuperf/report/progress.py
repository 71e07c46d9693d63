"""Lines written while a test runs long for a reason the reader cannot see (confirming a regression).

Inert with no terminal (an xdist worker, ``-q -q``, a library caller), so the engines never need to ask.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

LineSink = Callable[[str], None]
QUIETEST_WITH_PROGRESS = -1  # pytest's verbosity under -q; -q -q asks for no more than the outcome


class Progress:
    """Writes ``gpuperf: ...`` lines through ``write_line``; does nothing without one."""

    def __init__(self, write_line: LineSink | None = None) -> None:
        self._write = write_line

    @property
    def active(self) -> bool:
        return self._write is not None

    def confirming(self, test_key: str, pair_index: int, pairs: int) -> None:
        """Compare-ref: fresh process pair ``pair_index`` (1-based) of ``pairs`` is measuring ``test_key``."""
        self._line(f"confirming {test_key}: fresh pair {pair_index} of {pairs}")

    def remeasuring(self, test_key: str, index: int, count: int) -> None:
        """Baseline mode: re-measure ``index`` (1-based) of ``count`` of a suspected regression."""
        self._line(f"re-measuring {test_key}: {index} of {count}")

    def _line(self, text: str) -> None:
        if self._write is not None:
            self._write(f"gpuperf: {text}")

    @classmethod
    def for_config(cls, config: pytest.Config) -> Progress:
        """Writing to pytest's terminal, around output capturing; inert where nobody would read it.

        Called from ``pytest_configure``, before pytest's terminal reporter exists (its own
        ``pytest_configure`` registers it after ours runs): the reporter is looked up when a line
        is written, while a test runs.
        """
        # an xdist worker's output is not shown
        if hasattr(config, "workerinput") or config.get_verbosity() < QUIETEST_WITH_PROGRESS:
            return cls()

        def write_line(text: str) -> None:
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            if reporter is None:  # -p no:terminal
                return
            capture = config.pluginmanager.get_plugin("capturemanager")
            # A test is running: its captured output must not swallow the line (as --setup-show does).
            disabled = getattr(capture, "global_and_fixture_disabled", None)
            with disabled() if disabled is not None else contextlib.nullcontext():
                reporter.write_line(text)

        return cls(write_line)
