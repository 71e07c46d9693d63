"""The notes a reader must not miss, by kind: a line a kind in the terminal, a bullet a kind in the PR comment.

The kinds (``note_groups``):

- a comparison whose verdict speaks (a regression, an improvement, not comparable, unstable, not
  gated): of that verdict and the rule that gave it (``rows.deciding_rule``), with that rule's note;
- an unchanged time past its threshold (a guard of the gate decided, and the reader needs why): of
  the rules whose notes make up its note;
- a measurement's notice (never a routine note, ``NoteKind.ROUTINE``): of its topic (``Note.topic``),
  or, without one, of its exact text.

A kind's line names how many measurements it concerns, the first of them, and the first one's note;
the terminal keeps a line to ``LINE_LIMIT`` characters, shortening the note between its start and its
end (``cut``) and naming no measurement of a group where the note would get too little room. Every
note in full is in ``--gpuperf-explain`` and the reports (``FULL_NOTES``).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from pytest_gpuperf.model import Comparison, Kind, NoteKind, SessionResults, Verdict
from pytest_gpuperf.report.rows import deciding_rule

LINE_LIMIT = 160  # characters of a line the terminal writes about the run: about two thirds of a wide terminal
FULL_NOTES = "every note in full: --gpuperf-explain, and the reports (--gpuperf-json, --gpuperf-html)"
_SPEAKING = frozenset(
    {
        Verdict.REGRESSION,
        Verdict.IMPROVEMENT,
        Verdict.NOT_COMPARABLE,
        Verdict.UNSTABLE,
        Verdict.NOT_GATED,
        Verdict.NOT_RESOLVED,
    }
)


@dataclass
class NoteGroup:
    """Notes of one kind: its label (the verdict and rule, or the topic; "" for an exact text), the measurements
    it concerns in the order seen, and the first one's note."""

    label: str
    text: str
    keys: list[str] = field(default_factory=list)

    def who(self, named: bool = True) -> str:
        """``KEY``, or ``5 measurements (KEY, +4 more)`` (``named=False``: ``5 measurements``)."""
        if len(self.keys) == 1:
            return self.keys[0]
        more = f" ({self.keys[0]}, +{len(self.keys) - 1} more)" if named else ""
        return f"{len(self.keys)} measurements{more}"

    def _prefix(self, named: bool = True) -> str:
        """What the line is about: ``label: who: `` (a single measurement's note speaks for itself: ``key: ``)."""
        if len(self.keys) == 1 or not self.label:
            return f"{self.who(named)}: "
        return f"{self.label}: {self.who(named)}: "

    def line(self, limit: int | None = None) -> str:
        """The line, its note shortened in the middle to fit ``limit`` characters (None: whole)."""
        prefix = self._prefix()
        if limit is None or len(prefix) + len(self.text) <= limit:
            return prefix + self.text
        if limit - len(prefix) < _LEAST_NOTE:
            prefix = self._prefix(named=False)
        return cut(prefix + cut(self.text, max(limit - len(prefix), _LEAST_NOTE)), limit)


_LEAST_NOTE = 100  # characters of a note a line keeps, naming no measurement of a group if need be
_GAP = " … "


def cut(text: str, limit: int = LINE_LIMIT) -> str:
    """``text`` in at most ``limit`` characters, with an ellipsis where words give way.

    A note says what was found first and what to do last, in clauses joined by "; " (one a rule):
    a longer one keeps its leading clauses that fit and its last one (the evidence between gives
    way, at words), else its start and end. Every note in full: ``FULL_NOTES``."""
    if len(text) <= limit:
        return text
    *leading, last = text.split("; ")
    room = limit - len(_GAP)
    if leading and len(last) <= room // 2:
        head = leading[0]
        for clause in leading[1:]:
            if len(head) + 2 + len(clause) > room - len(last):
                break
            head += "; " + clause
        return f"{_head(head, room - len(last))}{_GAP}{last}"
    return f"{_head(text, room - room // 3)}{_GAP}{_tail(text, room // 3)}"


def _head(text: str, room: int) -> str:
    """The start of ``text`` in at most ``room`` characters, ending at a word."""
    if len(text) <= room:
        return text
    head = text[:room]
    return (head[: head.rfind(" ")] if " " in head else head).rstrip(" ,;:(")


def _tail(text: str, room: int) -> str:
    """The end of ``text`` in at most ``room`` characters, starting at a word."""
    tail = text[len(text) - room :]
    return tail[tail.find(" ") + 1 :] if " " in tail else tail


def wrapped(text: str, prefix: str = "gpuperf: ") -> list[str]:
    """``prefix`` and ``text`` as lines of at most ``LINE_LIMIT`` characters, the continued ones indented under it."""
    return textwrap.wrap(text, width=LINE_LIMIT, initial_indent=prefix, subsequent_indent=" " * len(prefix),
                         break_long_words=False, break_on_hyphens=False)  # fmt: skip


def _deciding_note(c: Comparison, rule: str) -> str:
    """The note of the step of ``rule`` that gave ``c`` its verdict (the comparison's whole note without one)."""
    notes = [step.note for step in c.explanation if step.rule == rule and step.note]
    return notes[-1] if notes else c.note


def _loud_rules(c: Comparison) -> tuple[str, ...]:
    """The rules whose notes make up ``c``'s short note (the steps that were not quiet)."""
    return tuple(dict.fromkeys(n.rule for n in c.explanation if n.note and n.note in c.note))


def quietly_past(c: Comparison) -> bool:
    """An unchanged comparison whose change exceeds its own threshold: a guard of the gate decided."""
    return (
        c.verdict is Verdict.UNCHANGED and c.change is not None and c.threshold is not None
        and abs(c.change) > c.threshold
    )  # fmt: skip


def quiet_past(c: Comparison, threshold: float) -> bool:
    """An unchanged time past the session's threshold or its own (a guard of the gate decided): the reader needs why."""
    past_session = c.kind is Kind.TIME and c.change is not None and abs(c.change) > threshold
    return c.verdict is Verdict.UNCHANGED and (past_session or quietly_past(c))


def _comparison_kind(c: Comparison) -> tuple[tuple[str, ...], str, str]:
    """(kind, label, text) of a comparison's note."""
    if c.verdict in _SPEAKING and (rule := deciding_rule(c)) is not None:
        return ("rule", c.verdict.value, rule), f"{c.verdict.value} [{rule}]", _deciding_note(c, rule)
    rules = _loud_rules(c)
    if rules:
        return ("rules", c.verdict.value, *rules), f"{c.verdict.value} [{', '.join(rules)}]", c.note
    return ("text", c.note), "", c.note


def note_groups(session: SessionResults, threshold: float) -> list[NoteGroup]:
    """The notes a reader must not miss, grouped by kind, in the order first seen (``threshold``: the session's)."""
    groups: dict[tuple[str, ...], NoteGroup] = {}

    def add(kind: tuple[str, ...], label: str, key: str, text: str) -> None:
        group = groups.setdefault(kind, NoteGroup(label, text))
        if key not in group.keys:
            group.keys.append(key)

    for r in session.results:
        m = r.measurement
        said = []
        for c in r.comparisons:
            if c.note and (c.verdict in _SPEAKING or quiet_past(c, threshold)):
                kind, label, text = _comparison_kind(c)
                add(kind, label, m.key, text)
                said.append(c.note)
        for n in m.notes:
            if n.kind is NoteKind.NOTICE and n.text not in " ".join(said):
                add(("topic", n.topic) if n.topic else ("text", n.text), n.topic, m.key, n.text)
    return list(groups.values())
