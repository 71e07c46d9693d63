"""The performance history: every measuring session recorded in a store, change points over the series."""

from __future__ import annotations
