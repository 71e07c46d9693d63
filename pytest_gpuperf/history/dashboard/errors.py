"""The dashboard's error, defined in errors.py with the plugin's other exceptions."""

from __future__ import annotations

from pytest_gpuperf.errors import DashboardError

__all__ = ["DashboardError"]
