"""Strings from tests and pull requests are inert in every report (report/text.py and its users).

The hostile session's strings try what a test's code or a branch name could: @mentions,
an image, links, raw HTML, a backtick that closes a code span, an issue reference,
terminal escape sequences (colour, an OSC 8 hyperlink), a carriage return and a bell.
"""

from __future__ import annotations

import dataclasses
import io
import re

import pytest
from test_report_helpers import BASE, ENV, HEAD, baseline, measurement, time_cmp

from pytest_gpuperf.model import Comparison, MeasurementResult, Metric, SessionResults, Verdict
from pytest_gpuperf.report.html import render_html
from pytest_gpuperf.report.markdown import render_comment
from pytest_gpuperf.report.terminal import PlainWriter, render_summary
from pytest_gpuperf.report.text import ZWJ, html_text, md_code, md_text, plain

TEST_ID = "tests/perf/test_x.py::test_`x`[@octocat]"
NAME = "![img](https://e.vil/p.png) @team"
NOTE = "\x1b[31mred\x1b[0m <img src=x onerror=alert(1)> see [here](https://e.vil) ``` fixes #12\r\x07"
OSC8_LINK = "\x1b]8;;https://e.vil\x07click\x1b]8;;\x07 <b>now</b>"
UNIT = "<i>GB</i>/s @ops"


def hostile_session() -> SessionResults:
    m = measurement(
        TEST_ID,
        NAME,
        1000.0,
        unstable_reason=OSC8_LINK,
        metrics=(Metric(name="thr*put*", value=2.0, unit=UNIT, description=NOTE),),
    )
    base = baseline(m, 1000.0)
    result = MeasurementResult(
        measurement=m,
        baseline=base,
        comparisons=(
            time_cmp(m, base, Verdict.UNCHANGED, evidence="within noise"),
            Comparison(
                key=m.key,
                metric="metric.thr*put*",
                verdict=Verdict.REGRESSION,
                current=2.0,
                baseline=3.0,
                unit=UNIT,
                change=-1 / 3,
                note=NOTE,
            ),
        ),
    )
    return SessionResults(
        results=(result,),
        environment=dataclasses.replace(ENV, device_name="GPU @nvidia <b>"),
        provenance=dataclasses.replace(HEAD, branch="@octocat/[x](https://e.vil)"),
        mode="compare-ref",
        started_at="2026-01-02T03:04:05+00:00",
        compare_ref="main`<b>",
        base_provenance=BASE,
    )


# -- the functions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\x1b[1;31mred\x1b[0m", "red"),
        ("\x1b]8;;https://e.vil\x07link\x1b]8;;\x1b\\", "link"),  # OSC 8, ended by BEL and by ST
        ("\x9b2Jcleared", "cleared"),  # the 8-bit CSI
        ("a\rb\x00c\x7fd\x85e\x9cf", "abcdef"),  # C0, DEL, C1
        ("tab\there\nnext", "tab here next"),
        ("\x1bclone ESC", "lone ESC"),  # ESC c: a two-character escape (reset)
        ("ünïcødé ✓ 日本", "ünïcødé ✓ 日本"),
    ],
)
def test_plain_strips_escapes_and_control_characters(raw: str, expected: str) -> None:
    assert plain(raw) == expected


def test_plain_keeps_newlines_when_asked() -> None:
    assert plain("a\r\nb\nc\x1b[2K", keep_newlines=True) == "a\nb\nc"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("@octocat", f"@{ZWJ}octocat"),
        ("![x](https://e.vil/p.png)", r"\!\[x\](https\://e.vil/p.png)"),
        ("<img src=x>", r"\<img src=x\>"),
        ("www.e.vil and HTTP://e.vil", r"www\.e.vil and HTTP\://e.vil"),
        ("a`b", r"a\`b"),
        ("**bold** _it_ ~~gone~~ peak_allocated", r"\*\*bold\*\* \_it\_ \~\~gone\~\~ peak_allocated"),
        ("&#64;octocat fixes #12, not #x", f"\\&#{ZWJ}64;octocat fixes #{ZWJ}12, not #x"),
        ("a@b.com", f"a@{ZWJ}b.com"),
        ("back\\slash", "back\\\\slash"),
    ],
)
def test_md_text_escapes_markup_mentions_and_links(raw: str, expected: str) -> None:
    assert md_text(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("plain", "`plain`"),
        ("a`b", "``a`b``"),
        ("a`b``c", "```a`b``c```"),
        ("`", "`` ` ``"),
        ("x``", "``` x`` ```"),
        ("  both  ", "`   both   `"),
        ("line\nbreak\x1b[0m", "`line break`"),
        ("", ""),
    ],
)
def test_md_code_fences_any_backticks(raw: str, expected: str) -> None:
    assert md_code(raw) == expected


def test_html_text_escapes_tags_quotes_and_strips_controls() -> None:
    assert html_text("<b a=\"1\" b='2'>&\x1b[31m\x07</b>") == "&lt;b a=&quot;1&quot; b=&#x27;2&#x27;&gt;&amp;&lt;/b&gt;"


# -- through the real renderers ---------------------------------------------------------


def test_pr_comment_renders_hostile_strings_inert() -> None:
    lines = render_comment(hostile_session()).splitlines()
    test_cell = "``test_x.py::test_`x`[@octocat]``"
    name_cell = rf"\!\[img\](https\://e.vil/p.png) @{ZWJ}team"
    unit = rf"\<i\>GB\</i\>/s @{ZWJ}ops"
    assert lines[3] == (
        "🔴 **1 regression, 0 improvements, 0 unchanged, 0 new, 0 not comparable** against ``main`<b>`` "
        rf"(1 measurement on GPU @{ZWJ}nvidia \<b\>)"
    )
    assert (
        f"| {test_cell} | {name_cell} | metric.thr\\*put\\* | 3 {unit} | 2 {unit} | -33.3% |   | 🔴 regression |"
        in lines
    )
    assert (
        "- ``tests/perf/test_x.py::test_`x`[@octocat]::![img](https://e.vil/p.png) @team``: "
        rf"red \<img src=x onerror=alert(1)\> see \[here\](https\://e.vil) \`\`\` fixes #{ZWJ}12"
    ) in lines
    assert rf"- **head**: `aaaaaaaaaaaa` (@{ZWJ}octocat/\[x\](https\://e.vil), 2026-01-02T03:04:05+00:00)" in lines
    assert r"- **base (main\`\<b\>)**: `bbbbbbbbbbbb` (main, 2026-01-01T00:00:00+00:00)" in lines
    assert (
        f"| {test_cell} | {name_cell} | 12 x 10 | ±1.2% | 2.0% | - | cuda_event | click \\<b\\>now\\</b\\> |" in lines
    )


def test_pr_comment_is_inert_through_githubs_own_renderer() -> None:
    """cmark-gfm is what GitHub renders comments with; mentions are GitHub's own filter on the text."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    page = cmarkgfm.github_flavored_markdown_to_html(render_comment(hostile_session()))
    assert not re.search(r"<(a|img|b|i|script)\b", page), page
    assert re.findall(r"(?<![\w`])@(?!\u200d)\w+", re.sub(r"<code>.*?</code>", "", page)) == []
    assert "#12" not in page
    # no cell broke out of its row: two rows of eight in the table, one of eight in the noise table
    rows = re.findall(r"<tr>(.*?)</tr>", page, flags=re.S)
    assert [row.count("<td") for row in rows if "<td" in row] == [8, 8, 8]


def test_terminal_summary_gets_no_control_characters() -> None:
    out = io.StringIO()
    render_summary(hostile_session(), PlainWriter(out, color=False, width=160))
    text = out.getvalue()
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", text), repr(text)
    lines = text.splitlines()
    assert "gpuperf: compared with main`<b>" in lines[0]
    assert "    metric.thr*put*: 2 <i>GB</i>/s @ops vs 3 <i>GB</i>/s @ops (-33.3%) regression" in lines
    assert "    unstable: click <b>now</b>" in lines


def test_html_report_escapes_and_strips_hostile_strings() -> None:
    page = render_html(hostile_session())
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", page)
    assert "<img src=x" not in page and "<b>now" not in page and "<i>GB" not in page
    assert '<tr><td colspan="6" class="note">red &lt;img src=x onerror=alert(1)&gt; see [here](https://e.vil)' in page
    assert "<td><code>tests/<wbr>perf/<wbr>test_x.py<wbr>::test_`x`<wbr>[@octocat]</code></td>" in page
    assert '<p class="note">unstable: click &lt;b&gt;now&lt;/b&gt;</p>' in page
