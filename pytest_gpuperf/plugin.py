"""pytest layer of pytest-gpuperf (being written: options, hooks, fixture)."""

from __future__ import annotations
