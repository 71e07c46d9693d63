"""A profile diff page: the ops table of a confirmed regression's differential profile.

The section itself is the HTML report's (``report.html.why_section``), so a diff reads the
same in a session's report and in the history.
"""

from __future__ import annotations

from pytest_gpuperf.history.dashboard.axes import point_time
from pytest_gpuperf.history.dashboard.frame import code, document
from pytest_gpuperf.history.dashboard.layout import DiffPage, GroupKey
from pytest_gpuperf.report.html import why_section
from pytest_gpuperf.report.text import html_text as escape


def render_diff(page: DiffPage, title: str) -> str:
    key, point = page.series.key, page.point
    series_href = f"../series/{GroupKey.of(key).file_name}"
    facts = [
        ("test", code(key.test)),
        ("measurement", escape(key.measurement)),
        ("branch", code(key.branch)),
        ("commit", code(point.commit)),
        ("date", escape(point_time(point, page.series).isoformat())),
        ("runner", escape(point.runner)),
        ("device class", escape(key.device_class)),
        ("run", code(point.run_id)),
    ]
    items = "".join(f"<li><b>{name}</b>: {value}</li>" for name, value in facts)
    body = (
        f'<nav><a href="../index.html">{escape(title)}</a> / <a href="{escape(series_href)}">'
        f"{escape(key.test)}::{escape(key.measurement)}</a></nav>"
        f"<h1>Profile diff</h1><ul>{items}</ul>{why_section(page.diff, f'{key.test}::{key.measurement}')}"
    )
    return document(f"profile diff {key.test}::{key.measurement} at {point.commit[:10]} - {title}", body, root="../")
