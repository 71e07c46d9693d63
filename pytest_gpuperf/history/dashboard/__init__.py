"""The performance history's dashboard: a static site that works offline.

:func:`build_site` writes an index of every series with its latest change point (filters by
device class and test) and a page per test measurement and branch: per statistic a chart
with a median line and p10-p90 band for each device class, change points marked with their
commit range and change, baseline updates marked, and links to recorded profile diffs.
Charts are inline SVG; the one script and style sheet are files of the site. It renders;
it decides nothing (change points come from ``history.detect``).

May import: the history's model, ``report``, ``baseline`` and the leaves; no store, detector or verdict
(an import-linter contract keeps it so).
"""

from __future__ import annotations

from pytest_gpuperf.history.dashboard.errors import DashboardError
from pytest_gpuperf.history.dashboard.layout import diff_key
from pytest_gpuperf.history.dashboard.site import build_site

__all__ = ["DashboardError", "build_site", "diff_key"]
