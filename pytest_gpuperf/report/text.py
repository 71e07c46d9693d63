"""User-controlled strings made inert for each report.

Test ids, names, units, notes, operator names and git refs come from the tests' code or a pull
request's author. They reach a terminal, a PR comment posted by a bot and an HTML page, and none
may act there: no colours, cursor moves or line rewrites in a terminal; no @mentions, issue
references, links, images, HTML or broken code spans in the comment; no markup in the page.
A Markdown table cell needs its ``|`` escaped as well (``md_cell``, ``md_row``): every Markdown
writer (the PR comment, ``gpuperf history changes --format markdown``) builds its tables with them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

__all__ = ["html_text", "md_cell", "md_code", "md_row", "md_text", "plain"]

ZWJ = "\u200d"

# CSI (ESC [ or the 8-bit 0x9b, parameters, a final byte), OSC (ESC ] or 0x9d, up to BEL or
# ST), then ESC, intermediate bytes and one final byte (ESC c, ESC 7, ESC ( B, ...); what
# remains of a broken one is a lone control character.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]"
)
# C0 and C1 controls, and the bidirectional formatting characters (U+202A-U+202E embeddings
# and overrides, U+2066-U+2069 isolates, the LRM/RLM/ALM marks), with which an id such as
# "test_\u202etxt.exe" would display reversed: a reader must see the characters in their order.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROLS = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
# Text without any of these has nothing for ``plain`` to do (every escape sequence starts with one):
# the common case, tested first because the dashboard escapes a hover title per point.
_ANY_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_ANY_CONTROL_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f{_BIDI}]")
# The punctuation that makes markup mid-line: emphasis, code, links, images, tags, entities.
# A string never starts a line of the comment, so list and heading markers need nothing.
# An underscore inside a word (peak_allocated) is never emphasis in GFM and stays as it is.
_MD_PUNCTUATION = re.compile(r"([\\`*\[\]<>!~&]|(?<![^\W_])_|_(?![^\W_]))")
# GFM's bare-URL autolinks: "https:" and "www." stop being ones with an escape in them.
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|mailto|xmpp):|\b(www)\.")
_ISSUE_REF = re.compile(r"#(?=\d)")
_BACKTICKS = re.compile(r"`+")


def plain(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` without escape sequences or control characters; tabs (and newlines) as spaces."""
    if not (_ANY_CONTROL_BUT_NEWLINE if keep_newlines else _ANY_CONTROL).search(text):
        return text
    text = _ESCAPES.sub("", text)
    text = text.replace("\t", " ").replace("\r\n", "\n")
    if not keep_newlines:
        text = text.replace("\n", " ")
    return _CONTROLS.sub("", text)


def md_text(text: str) -> str:
    """``text`` as literal Markdown prose on one line.

    Markup punctuation is backslash-escaped and bare URLs kept from becoming links; a zero-width
    joiner follows ``@`` and a ``#`` before a digit, which GitHub's mention and issue-reference
    filters (run on the rendered text, after escapes are gone) do not match.
    """
    escaped = _MD_PUNCTUATION.sub(r"\\\1", plain(text))
    escaped = _AUTOLINK.sub(lambda m: f"{m[1]}\\:" if m[1] else f"{m[2]}\\.", escaped)
    return _ISSUE_REF.sub("#" + ZWJ, escaped.replace("@", "@" + ZWJ))


def md_code(text: str) -> str:
    """``text`` as a Markdown code span on one line: its fence is longer than any run of backticks inside."""
    content = plain(text)
    if not content:
        return ""
    longest = max((len(run) for run in _BACKTICKS.findall(content)), default=0)
    fence = "`" * (longest + 1)
    # A space on each side lets the content start or end with a backtick; CommonMark
    # strips exactly one from each side again (and only when both are there).
    if content.startswith("`") or content.endswith("`") or (content.startswith(" ") and content.endswith(" ")):
        content = f" {content} "
    return f"{fence}{content}{fence}"


def md_cell(markdown: str) -> str:
    """Markdown made by :func:`md_text`/:func:`md_code` as one table cell.

    GFM splits a row at every unescaped pipe, inside a code span too: a ``|`` in a test id would
    end its cell and its code span, and what follows (``<svg onload=...>``) would be raw HTML.
    """
    return markdown.replace("|", "\\|").replace("\n", " ").strip() or " "


def md_row(cells: Iterable[str]) -> str:
    """A GFM table row of cells of Markdown (each made inert by md_text/md_code, or the writer's own text)."""
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"


def html_text(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` for HTML element content or an attribute value."""
    return html.escape(plain(text, keep_newlines=keep_newlines), quote=True)
