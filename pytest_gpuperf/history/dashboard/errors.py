"""The dashboard's error: input it cannot show, named."""

from __future__ import annotations

from pytest_gpuperf.errors import GpuperfError


class DashboardError(GpuperfError, ValueError):
    """Input the dashboard cannot show: names the series, run, change point or profile diff at fault."""
