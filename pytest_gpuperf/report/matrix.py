"""One pull-request comment for the jobs of a GPU matrix: a row per test, a column per device, regressions first.

Each job (one device class, or one matrix entry) gives its session's results, or, where it left none, how
it ended (failed, cancelled), which its column shows instead of vanishing. Under the table: each
regression folded with its evidence, the command that reproduces it (report/repro.py) and its
differential profile; what changed in each device's environment (report/drift.py); the environments
side by side. The single-job comment (``report.markdown``) is unchanged.

GitHub refuses a comment over 65,536 characters (UTF-16 code units). The comment is made of blocks that
are kept whole or left out, never cut. What gives way first: the environments table, the rows of tests
that are unchanged, improved or new (from the end), the differential profiles of the last regressions
(their commands stay), the rows that could not be judged, and last the regressions; a closing note says
what was left out and links to the full report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_gpuperf.measure.env import DRIFT_FACTS
from pytest_gpuperf.model import (
    DEFAULT_MEASUREMENT,
    VERDICT_ORDER,
    Comparison,
    Kind,
    MeasurementResult,
    SessionResults,
    Verdict,
)
from pytest_gpuperf.report import text
from pytest_gpuperf.report.drift import cause_sentence, change_sentences, session_drift
from pytest_gpuperf.report.markdown import VERDICT_ICON, why_body
from pytest_gpuperf.report.repro import Rerun, rerun_of
from pytest_gpuperf.report.rows import count_of, counts_line, plural, split_key, unjudged_line
from pytest_gpuperf.report.text import md_row
from pytest_gpuperf.report.units import format_change, format_value
from pytest_gpuperf.report.why import headline as why_headline

MARKER = "<!-- pytest-gpuperf-matrix-comment -->"
COMMENT_LIMIT = 65_536  # GitHub's, in UTF-16 code units
_RANK = {v: i for i, v in enumerate(VERDICT_ORDER)}
_JUDGED_WORDS = {Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.UNCHANGED}  # a change says it all
# How a job that left no results ended (GitHub's conclusions), as its column shows it.
_ENDED = {
    "failure": ("❌", "job failed"),
    "cancelled": ("🚫", "job cancelled"),
    "timed_out": ("⌛", "job timed out"),
    "skipped": ("⏭️", "job skipped"),
    "action_required": ("⏸️", "job awaits approval"),
    "not run": ("❌", "gate did not run"),  # the Action's gate record: pytest never started
    "unreadable results": ("❔", "unreadable results"),
}
NOT_MEASURED = "–"  # the device's job ran, without this test


def utf16_units(markdown: str) -> int:
    """GitHub's count of a comment's length."""
    return len(markdown.encode("utf-16-le")) // 2


Inert = Literal["text", "code", "html", "block"]


def _inert(value: str, how: Inert = "text") -> str:
    """Every string from a results file or a job, made inert here and only here (report/text.py).

    ``text``: Markdown prose; ``code``: a code span; ``html``: inside raw HTML (a ``<summary>``);
    ``block``: one line of a fenced code block (a fence ends only at the start of a line).
    """
    if how == "code":
        return text.md_code(value)
    if how == "html":
        return text.html_text(value, keep_newlines=False)
    if how == "block":
        return text.plain(value)
    return text.md_text(value)


@dataclass(frozen=True)
class Job:
    """One column: a matrix job's session, or how a job that left no results ended."""

    label: str  # the job's name (its comment key) or its results file
    session: SessionResults | None = None
    ended: str | None = None  # how the job ended where not as a pass or a fail: GitHub's conclusion, pytest's exit

    @property
    def device_class(self) -> str | None:
        return self.session.environment.device_class if self.session is not None else None


def ordered_jobs(jobs: Iterable[Job]) -> list[Job]:
    """Columns in a stable order: by device class, then the job's name; jobs without results last, by name."""
    return sorted(jobs, key=lambda j: (j.session is None, j.device_class or "", j.label))


def _headers(jobs: Sequence[Job]) -> list[str]:
    """Each column's heading: the device class, with the job's name where two share one (or there is none)."""
    classes = [j.device_class for j in jobs]
    out = []
    for job, device in zip(jobs, classes, strict=True):
        if device is None:
            out.append(f"{_inert(job.label, 'code')} {' '.join(_ended(job))}")
        elif classes.count(device) > 1:
            out.append(f"{_inert(device, 'code')} ({_inert(job.label)})")
        else:
            out.append(_inert(device, "code"))
    return out


def _ended(job: Job) -> tuple[str, str]:
    """The mark and the words for how ``job`` ended (``Job.ended``)."""
    if job.ended is None:
        return "❔", "no results"
    return _ENDED.get(job.ended, ("❔", _inert(job.ended)))


def _deciding(result: MeasurementResult) -> Comparison | None:
    """The comparison that gave the measurement its verdict: time first, else the first of that verdict."""
    same = [c for c in result.comparisons if c.verdict is result.verdict]
    return next((c for c in same if c.kind is Kind.TIME), same[0] if same else None)


def verdict_cell(result: MeasurementResult) -> str:
    """``🔴 +23.1%``; a verdict that is no judgement says so in words (``🟠 unstable (+12.0%)``)."""
    icon = VERDICT_ICON[result.verdict]
    c = _deciding(result)
    if c is None or c.change is None:
        return f"{icon} {result.verdict.value}"
    what = "" if c.kind is Kind.TIME else f"{_inert(c.metric)} "
    if result.verdict in _JUDGED_WORDS:
        return f"{icon} {what}{format_change(c.change)}"
    return f"{icon} {result.verdict.value} ({what}{format_change(c.change)})"


def short_label(test_id: str, name: str, *, folders: bool = False) -> str:
    """``tests/perf/test_mm.py::test_mm[4096]`` -> ``test_mm.py::test_mm[4096]`` (the folders add little, unless
    ``folders``), and the measurement's name where it is not the default one."""
    path, test = split_key(test_id)
    short = test_id if folders or not path else f"{path.rsplit('/', 1)[-1]}::{test}"
    return short if name == DEFAULT_MEASUREMENT else f"{short} · {name}"


@dataclass(frozen=True)
class _Line:
    """A row of the test table: a measurement key and its result in each column (None: not there)."""

    key: str
    label: str
    results: tuple[MeasurementResult | None, ...]

    @property
    def rank(self) -> int:
        return min((_RANK[r.verdict] for r in self.results if r is not None), default=len(_RANK))


def _lines(jobs: Sequence[Job]) -> list[_Line]:
    """The table's rows, worst first; a test keeps its folders where two would read alike without them."""
    found: dict[str, list[MeasurementResult | None]] = {}
    labels: dict[str, tuple[str, str]] = {}  # key: (short, whole)
    for i, job in enumerate(jobs):
        for r in job.session.results if job.session is not None else ():
            m = r.measurement
            found.setdefault(m.key, [None] * len(jobs))[i] = r
            labels.setdefault(m.key, (short_label(m.test_id, m.name), short_label(m.test_id, m.name, folders=True)))
    shorts = Counter(short for short, _ in labels.values())
    lines = [_Line(key, _inert(short if shorts[short] == 1 else whole, "code"), tuple(found[key]))
             for key, (short, whole) in labels.items()]  # fmt: skip
    return sorted(lines, key=lambda line: (line.rank, line.key))


def _table_row(line: _Line, jobs: Sequence[Job]) -> str:
    cells = [line.label]
    for job, result in zip(jobs, line.results, strict=True):
        if job.session is None:
            cells.append(_ended(job)[0])  # the mark: the heading says how the job ended
        else:
            cells.append(verdict_cell(result) if result is not None else NOT_MEASURED)
    return md_row(cells)


# -- a regression, folded ------------------------------------------------------------------------------------------


def _evidence(c: Comparison) -> str:
    change = f" ({format_change(c.change)})" if c.change is not None else ""
    facts = [f"{_inert(c.metric)} {_inert(format_value(c.baseline, c.unit))} → "
             f"{_inert(format_value(c.current, c.unit))}{change}"]  # fmt: skip
    if c.evidence:
        facts.append(_inert(c.evidence))
    if c.threshold is not None:
        facts.append(f"threshold {c.threshold:.1%}")
    return "; ".join(facts)


def _regression_summary(result: MeasurementResult, device: str) -> str:
    """The collapsed line, raw HTML (GitHub reads no Markdown in it)."""
    m = result.measurement
    c = _deciding(result)
    change = f": {_inert(format_change(c.change), 'html')}" if c is not None and c.change is not None else ""
    words = None
    if result.profile_diff is not None:
        words = why_headline(result.profile_diff, lambda op: f"<code>{_inert(op, 'html')}</code>")
    why = f" · {words}" if words else ""
    test = _inert(short_label(m.test_id, m.name), "html")
    return f"🔴 <code>{test}</code> on <code>{_inert(device, 'html')}</code>{change}{why}"


def _regression_block(result: MeasurementResult, device: str, again: Rerun | None, *, why: bool) -> str:
    """A regression's section: its evidence, its repro command, and (``why``) its differential profile."""
    body = [f"- {_evidence(c)}" for c in result.comparisons if c.verdict is Verdict.REGRESSION]
    notes = [c.note for c in result.comparisons if c.verdict is Verdict.REGRESSION and c.note]
    body += [f"- {_inert(note)}" for note in notes]
    if again is not None:
        body += ["", "Reproduce (from the repository's root, at the head commit):", "", "```sh",
                 _inert(again.command(result.measurement), "block"), "```"]  # fmt: skip
    diff = result.profile_diff
    if diff is not None:
        body += ["", *(why_body(diff, None) if why else ["Why it got slower: in the full report."])]
    summary = _regression_summary(result, device)
    return "\n".join(["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", "", ""])


# -- the environments --------------------------------------------------------------------------------------------


def _environments(jobs: Sequence[Job]) -> str:
    """The facts that can move a figure (measure.env.DRIFT_FACTS), device by device."""
    measured = [j for j in jobs if j.session is not None]
    if not measured:
        return ""
    rows = []
    for fact in DRIFT_FACTS:
        values = [fact.read(j.session.environment) if j.session is not None else None for j in measured]
        if any(v is not None for v in values):
            rows.append(md_row([_inert(fact.label), *(_inert(f"{v}{fact.unit}") if v else "–" for v in values)]))
    if not rows:
        return ""
    names = [_inert(j.session.environment.device_name) for j in measured if j.session is not None]
    head = [md_row(["", *_headers(measured)]), "|---" * (len(measured) + 1) + "|", md_row(["device", *names])]
    return "\n".join(["<details>", "<summary>Environments</summary>", "", *head, *rows, "", "</details>", "", ""])


def _device_lines(job: Job, header: str) -> list[str]:
    """Under the summary: a device's counts, what it could not judge, what changed in its environment."""
    if job.session is None:
        return [f"- {header}: no results"]
    session = job.session
    lines = [f"- {header}: {_inert(counts_line(session))}"]
    if job.ended is not None:  # results, from a job that did not end as a pass or a fail
        lines.append(f"  - ⚠️ {' '.join(_ended(job))}")
    if unjudged := unjudged_line(session):
        lines.append(f"  - ⚠️ {_inert(unjudged)}")
    drift = session_drift(session)
    lines += [f"  - {_inert(sentence)}" for sentence in change_sentences(drift)]
    if cause := cause_sentence(drift):
        lines.append(f"  - ⚠️ **{_inert(cause)}**")
    return lines


def _summary(jobs: Sequence[Job], headers: Sequence[str]) -> list[str]:
    sessions = [j.session for j in jobs if j.session is not None]
    regressions = sum(r.verdict is Verdict.REGRESSION for s in sessions for r in s.results)
    regressed = sum(any(r.verdict is Verdict.REGRESSION for r in s.results) for s in sessions)
    missing = [h for j, h in zip(jobs, headers, strict=True) if j.session is None]
    icon = "🔴" if regressions or missing else "🟢"
    words = f"{count_of(regressions, Verdict.REGRESSION)} on {regressed} of {plural(len(jobs), 'device')}"
    refs = sorted({s.compare_ref for s in sessions if s.compare_ref})
    against = f" against {', '.join(_inert(r, 'code') for r in refs)}" if refs else ""
    line = f"{icon} **{words}**{against}"
    if missing:
        line += f" · {plural(len(missing), 'job')} without results"
    return [line]


# -- fitting the limit -------------------------------------------------------------------------------------------


@dataclass
class _Block:
    """A piece of the comment, kept whole or left out: ``variants`` richest first."""

    variants: tuple[str, ...]
    kind: str  # what the closing note counts when it is left out or made smaller: "row", "regression", ...
    chosen: int | None = None  # the variant kept (None: left out)

    @property
    def text(self) -> str:
        return self.variants[self.chosen] if self.chosen is not None else ""


def _fit(blocks: Sequence[_Block], steps: Sequence[tuple[str, Sequence[_Block]]], budget: int,
         size: Callable[[str], int]) -> None:  # fmt: skip
    """Keep blocks while they fit ``budget``, step by step: ``("keep", blocks)`` keeps each block's smallest
    variant in order, ``("enrich", blocks)`` gives kept blocks their richest variant that fits, in order.

    The first block of a kind that does not fit closes that kind: no later one is kept, so a table never
    skips a row for a later, smaller one.
    """
    used = sum(size(b.text) for b in blocks)
    closed: set[str] = set()
    for step, chosen in steps:
        for block in chosen:
            if step == "keep":
                cost = size(block.variants[-1])
                if block.kind in closed or used + cost > budget:
                    closed.add(block.kind)
                    continue
                block.chosen, used = len(block.variants) - 1, used + cost
                continue
            for richer in range(block.chosen or 0):
                extra = size(block.variants[richer]) - size(block.text)
                if used + extra <= budget:
                    block.chosen, used = richer, used + extra
                    break


_LEFT_OUT = {"row": "test rows", "regression": "regressions", "profile": "regressions' differential profiles"}


def _note(left_out: dict[str, int], link: str | None, limit: int) -> str:
    """The closing note: what the comment left out to fit ``limit``, and where it is."""
    if not left_out:
        return ""
    parts = [f"{n} {_LEFT_OUT[kind]}" if kind in _LEFT_OUT else kind for kind, n in left_out.items()]
    where = f"[the full report]({link})" if link else "the results files"
    return f"\n---\n**Shortened** to the limit of {limit:,}: {', '.join(parts)} left out; see {where}.\n"


def _left_out(blocks: Iterable[_Block]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for block in blocks:
        kind = block.kind if block.chosen is None else "profile" if block.chosen > 0 else None
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def render_matrix(
    jobs: Iterable[Job],
    *,
    link: str | None = None,
    marker: str = MARKER,
    limit: int = COMMENT_LIMIT,
    size: Callable[[str], int] = utf16_units,
) -> str:
    """The matrix comment for ``jobs``, at most ``limit`` by ``size`` (GitHub's UTF-16 count by default).

    ``link``: where the full reports are (the run's artifacts); ``marker``: the hidden first line a
    workflow finds its comment by.
    """
    columns = ordered_jobs(jobs)
    headers = _headers(columns)
    opening = [marker, f"## pytest-gpuperf · {plural(len(columns), 'device')}", "", *_summary(columns, headers)]
    if link:
        opening += ["", f"[Results, HTML reports and traces]({link})"]
    opening += ["", *(line for job, h in zip(columns, headers, strict=True) for line in _device_lines(job, h)), ""]
    lines = _lines(columns)
    table_head = [md_row(["test", *headers]), "|---" + "|:---:" * len(columns) + "|"] if lines else []
    head = _Block(("\n".join([*opening, *table_head]) + "\n",), "head", chosen=0)
    rows = {line.key: _Block((_table_row(line, columns) + "\n",), "row") for line in lines}
    regressions = [_regression(r, job) for job in columns for r in _regressed(job)]
    heading = _Block(("\n### Regressions\n\n",), "heading", chosen=0 if regressions else None)
    env = _environments(columns)
    environments = [_Block(("\n" + env,), "the environments table")] if env else []
    by_rank = [[rows[line.key] for line in lines if low <= line.rank < high] for low, high in _ROW_TIERS]
    blocks = [head, *rows.values(), heading, *regressions, *environments]
    room = size(_note({"row": 10**6, "regression": 10**6, "profile": 10**6, "the environments table": 1}, link, limit))
    worst, unjudged, rest = by_rank
    steps = [("keep", worst), ("keep", regressions), ("keep", unjudged), ("enrich", regressions), ("keep", rest),
             ("keep", environments)]  # fmt: skip
    _fit(blocks, steps, limit - room, size)
    if not any(b.chosen is not None for b in regressions):
        heading.chosen = None
    left_out = _left_out([*rows.values(), *regressions, *environments])
    return "".join(b.text for b in blocks) + _note(left_out, link, limit)


# The test table's rows in the order they are kept: regressions, then what could not be judged, then the rest.
_ROW_TIERS = (
    (_RANK[Verdict.REGRESSION], _RANK[Verdict.REGRESSION] + 1),
    (_RANK[Verdict.REGRESSION] + 1, _RANK[Verdict.IMPROVEMENT]),
    (_RANK[Verdict.IMPROVEMENT], len(_RANK) + 1),
)


def _regressed(job: Job) -> list[MeasurementResult]:
    results = job.session.results if job.session is not None else ()
    return sorted((r for r in results if r.verdict is Verdict.REGRESSION), key=lambda r: r.measurement.key)


def _regression(result: MeasurementResult, job: Job) -> _Block:
    """A regression's section, with its differential profile and without (the smaller variant)."""
    assert job.session is not None
    again = rerun_of(job.session)
    device = job.session.environment.device_class
    full = _regression_block(result, device, again, why=True)
    light = _regression_block(result, device, again, why=False)
    return _Block((full, light) if full != light else (full,), "regression")
