"""Change points rendered for people (history/render.py): hostile names and units stay inert in Markdown."""

from __future__ import annotations

import re

import pytest

from pytest_gpuperf.history.model import ChangeKind, ChangePoint, SeriesKey
from pytest_gpuperf.history.render import render_markdown
from pytest_gpuperf.report.text import ZWJ

UNIT = "[pwn](http://evil.example/u) @octocat <img src=x onerror=alert(1)>"
TEST = "t.py::test_x[a|<svg onload=alert(1)>]"


def _hostile() -> ChangePoint:
    key = SeriesKey(TEST, "default|<b>x</b>", "metric.thr|put", "cuda-h100|<i>", "main|@octocat")
    supporting = ChangePoint(
        SeriesKey(TEST, "default", "metric.a|<svg onload=alert(2)>", "c", "main"), "a" * 40, "b" * 40, 3, 1.0, 2.0,
        1.0, 0.5, 1.5, 0.001, ChangeKind.REGRESSION, 2, unit=UNIT,
    )  # fmt: skip
    return ChangePoint(key, "a" * 40, "b" * 40, 3, 1.0, 2.0, 1.0, 0.5, 1.5, 0.001, ChangeKind.REGRESSION, 2,
                       unit=UNIT, supporting=(supporting,))  # fmt: skip


def test_units_and_pipes_in_names_are_escaped_in_every_cell() -> None:
    text = render_markdown([_hostile()])
    row = text.splitlines()[2]
    assert row.count(" | ") == 9  # ten cells: no pipe of a name or unit split one
    assert f"\\[pwn\\](http\\://evil.example/u) @{ZWJ}octocat \\<img src=x onerror=alert(1)\\>" in row
    assert "`t.py::test_x[a\\|<svg onload=alert(1)>]`" in row


def test_the_changes_table_is_inert_through_githubs_own_renderer() -> None:
    """cmark-gfm is what GitHub renders issues and comments with; mentions are GitHub's own filter on the text."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    # unsafe: raw HTML is kept, not omitted, so any that got through shows (GitHub filters it after)
    page = cmarkgfm.github_flavored_markdown_to_html(render_markdown([_hostile()]), cmarkgfm.Options.CMARK_OPT_UNSAFE)
    assert not re.search(r"<(a|img|b|i|svg|script)\b", page), page
    assert (
        "<td><code>t.py::test_x[a|&lt;svg onload=alert(1)&gt;]</code> <code>default|&lt;b&gt;x&lt;/b&gt;</code>" in page
    )
    assert re.findall(r"(?<![\w`])@(?!\u200d)\w+", re.sub(r"<code>.*?</code>", "", page, flags=re.S)) == []
    rows = re.findall(r"<tr>(.*?)</tr>", page, flags=re.S)
    assert [row.count("<td") for row in rows if "<td" in row] == [10]
