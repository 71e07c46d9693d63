"""What the pull-request comment and the job summary say: one text, two size limits.

Both start with a heading that names the comment key, a line with the gate's outcome
and a link to the run's artifacts, then the Markdown report pytest-gpuperf wrote
(``--gpuperf-markdown``), or "No perf test measured in this run." where it wrote none.
A text over its limit is cut at a line, open ``<details>`` blocks are closed, and a
note with the link to the full report ends it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

MARKER_PREFIX = "<!-- pytest-gpuperf-comment"
# GitHub refuses a comment body over 65,536 characters. Counted in UTF-16 code units,
# never fewer than characters, so a body within the count is within GitHub's.
COMMENT_LIMIT = 65_536
# GitHub accepts at most 1 MiB of summary per step.
SUMMARY_LIMIT = 1_048_576
KEY_MAX = 200
NOTHING_MEASURED = "No perf test measured in this run."

# pytest's exit codes (pytest.ExitCode), as a reader of the comment needs them.
_EXIT_MEANING = {
    0: "all tests passed",
    1: "a regression or a failing test",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests were collected",
}

Measure = Callable[[str], int]


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def marker(key: str) -> str:
    """The hidden first line that tells this key's comment from every other.

    The key is percent-encoded: two keys never share a marker, and no key can end
    the HTML comment early.
    """
    return f"{MARKER_PREFIX} key={urllib.parse.quote(key, safe='')} -->"


def code(text: str) -> str:
    """``text`` as an inline code span, inert in Markdown (no mention, link or emphasis)."""
    flat = " ".join(text.replace("`", "'").split())
    return f"`{flat}`" if flat else "` `"


def gate_line(exit_code: int | None) -> str:
    if exit_code is None:
        return "The perf gate **did not run**: the job failed before pytest started (see the job log)"
    word = "passed" if exit_code == 0 else "failed"
    meaning = _EXIT_MEANING.get(exit_code, "unexpected exit code")
    return f"Gate **{word}** (pytest exit code {exit_code}: {meaning})"


def run_line(conclusion: str) -> str:
    """The outcome line from GitHub's conclusion of the workflow run (never from an artifact)."""
    word = {"success": "passed", "failure": "failed"}.get(conclusion)
    if word is not None:
        return f"Gate **{word}** (the workflow run's conclusion, from GitHub: {conclusion})"
    return f"Gate result **unknown** (the workflow run's conclusion, from GitHub: {code(conclusion)})"


@dataclass(frozen=True)
class Outcome:
    """One gate job's result, as the comment and the summary report it."""

    key: str
    exit_code: int | None  # None: pytest never ran
    report: str | None  # the --gpuperf-markdown file's text; None where none was written
    link: str  # the results artifact, or the run's page
    verdict: str | None = None  # the outcome line, where it comes from elsewhere than exit_code (from-artifacts)


def _content(report: str | None) -> str:
    """The report without its marker and heading (the composed text has its own)."""
    if report is None:
        return NOTHING_MEASURED + "\n"
    lines = [line for line in report.splitlines(keepends=True) if not line.lstrip().startswith(MARKER_PREFIX)]
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and lines[0].startswith("## pytest-gpuperf"):
        lines.pop(0)
    while lines and not lines[0].strip():
        lines.pop(0)
    return "".join(lines) or NOTHING_MEASURED + "\n"


def _head(outcome: Outcome) -> str:
    return (
        f"## pytest-gpuperf · {code(outcome.key)}\n\n"
        f"{outcome.verdict or gate_line(outcome.exit_code)} · [results, HTML report and traces]({outcome.link})\n\n"
    )


def _closers(open_details: int) -> str:
    return "\n\n</details>\n" * open_details


def _details_delta(line: str) -> int:
    text = line.strip().lower()
    return text.count("<details") - text.count("</details>")


def _cut_lines(content: str, budget: int, measure: Measure) -> str:
    """The longest run of whole lines from the start that fits ``budget`` with its closing tags."""
    kept: list[str] = []
    used = 0
    depth = 0
    for line in content.splitlines(keepends=True):
        after = max(depth + _details_delta(line), 0)
        if used + measure(line) + measure(_closers(after)) > budget:
            break
        kept.append(line)
        used += measure(line)
        depth = after
    if not kept and content:
        return _prefix(content.splitlines()[0], budget, measure)  # one line longer than the budget
    return "".join(kept) + _closers(depth)


def _prefix(text: str, budget: int, measure: Measure) -> str:
    """The longest start of ``text`` within ``budget``."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if measure(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def fit(head: str, content: str, note: str, limit: int, measure: Measure) -> str:
    """``head + content`` if within ``limit``, else head, as much content as fits, and ``note``."""
    whole = head + content
    if measure(whole) <= limit:
        return whole
    budget = limit - measure(head) - measure(note)
    if budget < 0:
        raise ValueError(f"the heading alone is over the limit of {limit}")
    return head + _cut_lines(content, budget, measure) + note


def _truncation_note(link: str, limit: int, unit: str) -> str:
    return (
        f"\n\n---\n**Truncated** to GitHub's limit of {limit:,} {unit}: "
        f"the full report is in the [results artifact]({link}).\n"
    )


def comment_body(outcome: Outcome, limit: int = COMMENT_LIMIT) -> str:
    """The sticky comment: marker, heading, outcome, report; at most ``limit`` characters."""
    head = marker(outcome.key) + "\n" + _head(outcome)
    note = _truncation_note(outcome.link, limit, "characters")
    return fit(head, _content(outcome.report), note, limit, utf16_units)


def summary_text(outcome: Outcome, limit: int = SUMMARY_LIMIT) -> str:
    """The job summary: the comment's text without its marker, at most ``limit`` bytes."""
    note = _truncation_note(outcome.link, limit, "bytes")
    return fit(_head(outcome), _content(outcome.report), note, limit, utf8_bytes)
