"""The ``config.stash`` key of the plugin's per-session state.

A module of its own so the compare-ref worker plugin (abtest/worker_plugin.py)
reaches the session state without importing the pytest plugin module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_gpuperf.plugin import SessionState

STATE_KEY: pytest.StashKey[SessionState] = pytest.StashKey()
