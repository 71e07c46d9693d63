"""Trace a detection run's verdicts to their tests: change, threshold, contention, the machine's state and notes.

    python benchmarks/detection.py --trials 20 --results-dir runs/ ...
    python benchmarks/detection_trace.py runs/               # every session
    python benchmarks/detection_trace.py runs/ --misses      # false alarms and misses only

Reads the ``--gpuperf-json`` files that ``detection.py --results-dir`` keeps
(``TOOL-tTRIAL-lLEVEL.json``) and prints one line per test: verdict, the time
change against its baseline (or base ref), the threshold it had to pass, the
change with the run-queue wait taken out and how much of the time was waiting,
how far the machine's reference moved from the baseline's (baseline mode), and
the comparison's note, which says what decided (noise-raised threshold, the
contention or the machine's state, a re-measure or fresh pairs that did not confirm). The closing
lines count the deciding reasons over the sessions shown and, for compare-ref's
unchanged code, what its process pairs read: the first pairs' spread, how many
fresh pairs each confirmation took, and the fresh pairs' offset between the
sides and spread. It is a benchmark tool: CI does not run it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import statistics
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.cli import stability_targets
from pytest_gpuperf.verdict.stability import rms_log_change, spread_limit

_NAME = re.compile(r"^(?P<tool>.+)-t(?P<trial>\d+)-l(?P<level>\d+)\.json$")
# A compare-ref confirmation's pairs, as its evidence line lists them (engines/compare_ref/confirm.describe); the
# results JSON carries them in no other field.
_PAIRS = re.compile(r"fresh process pairs \(ratios (?P<ratios>[0-9., ]+)\); first pair (?P<first>[0-9.]+)")

# detection.py's tools that gate on a number written in an earlier session
_FROZEN_GATES = ("gpuperf-baseline",)

# What decided a test's verdict, by the phrases the gate writes into its notes.
_REASONS = (
    ("noise-raised threshold", "by run-to-run noise"),
    ("contention explains it", "contention, not a change in work"),
    ("correction too uncertain", "the correction itself is uncertain"),
    ("re-measure did not confirm", "not confirmed on re-measure"),
    ("confirmed by re-measure", "confirmed by"),
    ("fresh pairs did not confirm", "suspected regression was not confirmed"),
    ("machine's state, not judged", "than when the baseline was written"),
    ("baseline written slower", "so a regression could hide behind it"),
)


@dataclass(frozen=True)
class TestLine:
    tool: str
    trial: int
    level: int
    test: str
    verdict: str
    change: float | None
    threshold: float | None
    corrected: float | None  # the change with the run-queue wait taken out (None: neither side waited)
    wait_share: float | None
    machine: float | None  # the most any kind of the machine's reference moved, now over the baseline's
    note: str
    evidence: str = ""

    @property
    def alarm(self) -> bool:
        return self.verdict == "regression"

    def pairs(self) -> tuple[list[float], float | None]:
        """Compare-ref: the fresh pairs' ratios (none if not confirmed) and the first pair's ratio."""
        match = _PAIRS.search(self.evidence)
        if match is not None:
            return [float(r) for r in match["ratios"].split(",")], float(match["first"])
        first = 1.0 + self.change if self.change is not None and self.change > -1.0 else None
        return [], first  # unconfirmed: the verdict's change is the first pair's

    def reasons(self) -> list[str]:
        return [name for name, phrase in _REASONS if phrase in self.note]


def read_session(path: Path) -> list[TestLine]:
    """One line per test of a results file named as detection.py names them."""
    match = _NAME.match(path.name)
    if match is None:
        raise ValueError(f"{path}: not a detection results file (expected TOOL-tTRIAL-lLEVEL.json)")
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read results JSON: {exc}") from exc
    lines = []
    for result in document.get("results", []):
        time_comparison = next((c for c in result["comparisons"] if c["metric"].startswith("time.")), None)
        if time_comparison is None:
            continue
        measurement = result["measurement"]
        baseline = result.get("baseline") or {}
        lines.append(
            TestLine(
                tool=match["tool"], trial=int(match["trial"]), level=int(match["level"]),
                test=measurement["test_id"].rsplit("::", 1)[-1], verdict=time_comparison["verdict"],
                change=time_comparison.get("change"), threshold=time_comparison.get("threshold"),
                corrected=(time_comparison.get("correction") or {}).get("change"),
                wait_share=(time_comparison.get("correction") or {}).get("wait_share"),
                machine=machine_moved(measurement.get("reference_ns") or {}, baseline.get("reference_ns") or {}),
                note=time_comparison.get("note") or "", evidence=time_comparison.get("evidence") or "",
            )
        )  # fmt: skip
    return lines


def sessions(directory: Path) -> Iterator[list[TestLine]]:
    def order(p: Path) -> tuple[str, int, int]:
        m = _NAME.match(p.name)
        return (m["tool"], int(m["trial"]), int(m["level"])) if m else (p.name, 0, 0)

    for path in sorted(directory.glob("*.json"), key=order):
        if _NAME.match(path.name):
            yield read_session(path)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1%}"


def machine_moved(now: dict[str, float], base: dict[str, float]) -> float | None:
    """The reference's ratio now over the baseline's for the kind that moved most either way (None: no pair)."""
    ratios = [now[k] / base[k] for k in now.keys() & base.keys() if now[k] > 0 and base[k] > 0]
    return max(ratios, key=lambda r: abs(math.log(r)), default=None)


def _context(line: TestLine) -> str:
    parts = []
    if line.corrected is not None:
        parts.append(f"corrected {_pct(line.corrected)}, {line.wait_share or 0.0:.0%} waited")
    if line.machine is not None:
        parts.append(f"machine x{line.machine:.2f}")
    return "; ".join(parts) or "no contention"


def describe(session: Sequence[TestLine]) -> list[str]:
    first = session[0]
    alarm = any(t.alarm for t in session)
    outcome = ("FALSE ALARM" if alarm else "ok") if first.level == 0 else ("caught" if alarm else "MISSED")
    out = [f"{first.tool} trial {first.trial} at {first.level}%: {outcome}"]
    for t in session:
        threshold = "n/a" if t.threshold is None else f"{t.threshold:.1%}"
        out.append(f"  {t.test}: {t.verdict} {_pct(t.change)} (threshold {threshold}; {_context(t)}) {t.note}")
    return out


def is_wrong(session: Sequence[TestLine]) -> bool:
    alarm = any(t.alarm for t in session)
    return alarm if session[0].level == 0 else not alarm


def unchanged_spread(lines: Sequence[TestLine]) -> tuple[float, float, int] | None:
    """(RMS, mean) of the log change of unchanged code's tests, and their count; None below two.

    The RMS is taken around zero, not the mean: an offset between the session that
    wrote a baseline and the one gating against it is error to a gate like any other.
    """
    changes = [t.change for t in lines if t.level == 0 and t.change is not None and t.change > -1.0]
    if len(changes) < 2:
        return None
    return rms_log_change(changes), sum(map(math.log1p, changes)) / len(changes), len(changes)


def judged(lines: Sequence[TestLine]) -> list[TestLine]:
    """``lines`` with each change as the verdict read it: with the run-queue wait taken out where a side waited."""
    return [dataclasses.replace(t, change=t.corrected if t.corrected is not None else t.change) for t in lines]


def print_spreads(shown: Sequence[Sequence[TestLine]], slowdown: float, false_alarms: float, caught: float) -> None:
    by_tool: dict[str, list[TestLine]] = {}
    for session in shown:
        for line in session:
            by_tool.setdefault(line.tool, []).append(line)
    spreads = {tool: unchanged_spread(lines) for tool, lines in by_tool.items()}
    known = {tool: spread for tool, spread in spreads.items() if spread is not None}
    if not known:
        return
    print("\nSpread of unchanged code's log change across sessions (RMS around 0; sessions shown):")
    for tool, (rms, mean, count) in known.items():
        corrected = unchanged_spread(judged(by_tool[tool]))
        less = "" if corrected is None else f"; less their run-queue wait: {corrected[0]:.1%}"
        print(f"  {tool}: {rms:.1%} (mean {mean:+.1%}, {count} tests){less}")
    if not any(tool in _FROZEN_GATES for tool in known):
        return  # compare-ref measures its base in the same session: the limit is not about it
    limit = spread_limit(slowdown, false_alarms, caught)
    print(
        f"  a gate on a frozen number can keep false alarms at most {false_alarms:.0%} and catch at least"
        f" {caught:.0%} of {slowdown:.0%} slowdowns only while this is at most {limit:.1%}"
    )


def print_pairs(shown: Sequence[Sequence[TestLine]]) -> None:
    """Compare-ref's process pairs on unchanged code: the first pairs, and the fresh pairs that confirmed."""
    by_session = [[(t, *t.pairs()) for t in s if t.level == 0 and t.tool == "gpuperf-ref"] for s in shown]
    read = [reading for session in by_session for reading in session]
    firsts = [(math.log(first), t.threshold) for t, _, first in read if first is not None]
    confirmations = [[math.log(r) for r in ratios] for _, ratios, _ in read if ratios]
    if len(firsts) < 2:
        return
    logs = [x for x, _ in firsts]
    beyond = sum(1 for x, threshold in firsts if threshold is not None and abs(math.expm1(x)) > threshold)
    print("\nCompare-ref's process pairs on unchanged code (sessions shown):")
    print(f"  first pairs: {len(logs)} tests, log ratio spread {statistics.stdev(logs):.2%} (SD), "
          f"mean {statistics.fmean(logs):+.2%}, {beyond} beyond their threshold")  # fmt: skip
    if not confirmations:
        return
    sizes = Counter(len(c) for c in confirmations)
    confirming = sum(1 for session in by_session if any(ratios for _, ratios, _ in session))
    settled = ", ".join(f"{n} pairs: {count}" for n, count in sorted(sizes.items()))
    print(f"  confirmations: {len(confirmations)} in {confirming} session(s), settled by {settled}")
    pooled = [x for c in confirmations for x in c]
    if len(pooled) < 2:
        return
    within = sum((x - mean) ** 2 for c in confirmations for mean in [statistics.fmean(c)] for x in c)
    freedom = sum(len(c) - 1 for c in confirmations)
    spread = f", spread within a confirmation {math.sqrt(within / freedom):.2%} (pooled SD)" if freedom else ""
    offset, error = statistics.fmean(pooled), statistics.stdev(pooled) / math.sqrt(len(pooled))
    print(f"  fresh pairs: {len(pooled)}, head over base log ratio {offset:+.2%} ± {error:.2%} (mean ± SE){spread}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("directory", type=Path, help="the --results-dir of a detection.py run")
    parser.add_argument("--misses", action="store_true", help="only false alarms and missed slowdowns")
    stability_targets(parser)  # the targets of the spread limit
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        parser.error(f"{args.directory} is not a directory")
    shown = [s for s in sessions(args.directory) if s and (not args.misses or is_wrong(s))]
    for session in shown:
        print("\n".join(describe(session)))
    reasons = Counter(r for s in shown for t in s if t.level > 0 and not t.alarm for r in t.reasons() or ["none"])
    if reasons:
        print("\nWhy tests of slowed code were not failed (sessions shown):")
        for reason, count in reasons.most_common():
            print(f"  {reason}: {count}")
    if not args.misses:  # misses alone would bias the spread
        print_spreads(shown, args.slowdown, args.false_alarms, args.caught)
        print_pairs(shown)
    print(f"\n{len(shown)} session(s) shown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
