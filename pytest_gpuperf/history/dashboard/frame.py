"""The frame every page of the site shares: the head, the local style sheet and script, the content policy.

The Content-Security-Policy allows the site's own files and ``data:`` images and nothing
else: no script or style from anywhere else, no fetch, no font, no form submission. Where
a string somehow escaped the escaping, the browser still would not run it inline or
fetch anything for it.
"""

from __future__ import annotations

from pytest_gpuperf.history.dashboard.layout import ASSETS_DIR
from pytest_gpuperf.report.text import html_text as escape

STYLE_FILE, SCRIPT_FILE = "dashboard.css", "dashboard.js"
CONTENT_POLICY = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"
)


def document(title: str, body: str, *, root: str, script: bool = False) -> str:
    """A whole page; ``root`` leads from the page's folder to the site's (``""`` or ``"../"``)."""
    tag = f'<script src="{root}{ASSETS_DIR}/{SCRIPT_FILE}" defer></script>' if script else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_POLICY}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'  # else a browser asks the server for /favicon.ico
        f"<title>{escape(title)}</title>"
        f'<link rel="stylesheet" href="{root}{ASSETS_DIR}/{STYLE_FILE}">{tag}'
        f"</head><body>{body}</body></html>\n"
    )


def swatch(colour: str, shape: str = "") -> str:
    """A small square of ``colour`` (a colour of the module's own, never user text) for legends and tables."""
    inner = shape or f'<rect width="10" height="10" fill="{colour}"/>'
    return f'<svg class="swatch" viewBox="0 0 10 10" aria-hidden="true">{inner}</svg>'


def code(text: str) -> str:
    return f"<code>{escape(text)}</code>"


def breakable_code(text: str) -> str:
    """``text`` as code that may wrap after its folders and before its test and parameters (a test id in a table)."""
    escaped = escape(text)
    for separator, marked in (("/", "/<wbr>"), ("::", "<wbr>::"), ("[", "<wbr>[")):
        escaped = escaped.replace(separator, marked)
    return f"<code>{escaped}</code>"
