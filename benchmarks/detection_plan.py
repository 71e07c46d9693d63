"""The compare-ref confirmation plan, simulated: how many fresh pairs it measures, and what it decides.

    python benchmarks/detection_plan.py --trials 20000 --pairs 6 --threshold 0.02 --spread 0.015

Each simulated confirmation draws pair ratios whose logs are normal around the true
change with the given spread between pairs (what fresh process pairs read on a
shared CPU: 1% to 2.5% in docs/detection.md's runs), takes them through the plan
the engine uses (``readings.take_readings`` over ``verdict.pairs.pair_waves``,
stopped by ``verdict.pairs.pairs_done``) and judges the pairs it took as the gate
does (a regression when the estimate is above the threshold and the 95% interval
above 1). It prints, per true change, the share confirmed as a regression and the
mean number of pairs measured. No processes, no torch: the plan's statistics
alone, so that a change to the plan can be weighed before a session is timed.
A benchmark, not a test: CI does not run it. Results: docs/detection.md.

``--sessions N`` simulates whole compare-ref sessions instead: each of ``--tests``
tests reads a first-pair ratio (spread ``--first-spread``) that is suspected beyond
the threshold either way; a suspected regression is confirmed by the plan at
``--confidence``, a suspected improvement at ``IMPROVEMENT_CONFIDENCE``, all
through one pool of workers kept warm for the session, started as the looks need them.
It prints the sessions that raised an alarm or reported an improvement, and what
the confirmations cost: the pairs started and measured, and the seconds they add
at ``--wave-s`` for the first wave, ``--start-s`` for each pair started after it
and ``--pair-s`` per pair measured.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Callable

from pytest_gpuperf.stats import format_level
from pytest_gpuperf.verdict.confirmation import IMPROVEMENT_CONFIDENCE
from pytest_gpuperf.verdict.pairs import confirmed, pair_waves, pairs_done
from pytest_gpuperf.verdict.readings import take_readings

CHANGES = (0.0, 0.01, 0.02, 0.03, 0.05, 0.10)


def pair_reader(mean: float, spread: float, error: float, rng: random.Random) -> Callable[[int], float]:
    """One fresh pair's ratio: its own measurement error ``error`` plus an offset of its own, ``spread`` in all."""
    offset = math.sqrt(max(0.0, spread**2 - error**2))
    return lambda _: math.exp(rng.gauss(mean, offset) + rng.gauss(0.0, error))


def simulate(
    change: float, spread: float, pairs: int, threshold: float, rng: random.Random, confidence: float = 0.95,
    error: float = 0.0,
) -> tuple[bool, int]:  # fmt: skip
    """One confirmation of a suspected regression: (confirmed, pairs measured)."""
    take = pair_reader(math.log1p(change), spread, error, rng)

    def errors(ratios: list[float]) -> list[float]:
        return [error] * len(ratios) if error else []

    def done(ratios: list[float], planned: int) -> bool:
        return pairs_done(
            ratios, planned, pairs=pairs, threshold=threshold, confidence=confidence, errors=errors(ratios)
        )

    ratios = take_readings(take, pair_waves(pairs), done)
    return confirmed(ratios, threshold, confidence, errors(ratios)), len(ratios)


def session(change: float, args: argparse.Namespace, rng: random.Random) -> tuple[bool, bool, int, int, int]:
    """One compare-ref session of ``args.tests`` tests: (alarm, improvement reported, first waves started (0 or 1),
    pairs started after the first wave, pairs measured)."""
    alarm = improved = False
    started = measured = first_waves = later = 0
    waves_at = pair_waves(args.pairs)  # the pairs started when a look needs pair j (engines.compare_ref.confirm)
    offset = rng.gauss(0.0, args.session_offset)
    for _ in range(args.tests):
        first = rng.gauss(math.log1p(change), args.first_spread)
        if abs(first) <= math.log1p(args.threshold):
            continue
        regression = first > 0
        # an improvement's ratios are turned, and it is confirmed at the stricter level
        sign, level = (1.0, args.confidence) if regression else (-1.0, IMPROVEMENT_CONFIDENCE)
        threshold = args.threshold if regression else args.threshold / (1.0 - args.threshold)
        take = pair_reader(sign * (math.log1p(change) + offset), args.spread, args.pair_error, rng)

        def errors(ratios: list[float]) -> list[float]:
            return [args.pair_error] * len(ratios) if args.pair_error else []

        def done(ratios: list[float], planned: int, threshold: float = threshold, level: float = level) -> bool:
            return pairs_done(
                ratios, planned, pairs=args.pairs, threshold=threshold, confidence=level, errors=errors(ratios)
            )

        ratios = take_readings(take, pair_waves(args.pairs), done)
        measured += len(ratios)
        while started < len(ratios):
            now = next(w for w in waves_at if w > started)
            first_waves, later = (1, later) if started == 0 else (first_waves, later + now - started)
            started = now
        if confirmed(ratios, threshold, level, errors(ratios)):
            alarm, improved = alarm or regression, improved or not regression
    return alarm, improved, first_waves, later, measured


def sessions(args: argparse.Namespace, rng: random.Random) -> None:
    print(f"{args.sessions} sessions per change, {args.tests} tests each; first pair spread {args.first_spread:.1%}, "
          f"pairs {args.spread:.1%}; regressions confirmed at {format_level(args.confidence)}, improvements at "
          f"{format_level(IMPROVEMENT_CONFIDENCE)}; {args.pairs} pairs planned, "
          f"threshold {args.threshold:.1%}")  # fmt: skip
    print(
        "| true change | sessions alarmed | improvements reported | first waves: mean | pairs started later: mean "
        "| pairs: mean | added s: mean |"
    )
    print("|---|---|---|---|---|---|---|")
    for change in CHANGES:
        runs = [session(change, args, rng) for _ in range(args.sessions)]
        waves = statistics.mean(r[2] for r in runs)
        later = statistics.mean(r[3] for r in runs)
        pairs = statistics.mean(r[4] for r in runs)
        alarmed = sum(r[0] for r in runs) / len(runs)
        improved = sum(r[1] for r in runs) / len(runs)
        added = waves * args.wave_s + later * args.start_s + pairs * args.pair_s
        print(f"| {change:+.0%} | {alarmed:.2%} | {improved:.2%} | {waves:.2f} | {later:.2f} | {pairs:.2f} "
              f"| {added:.1f} |")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--pairs", type=int, default=6, help="--gpuperf-confirm-pairs")
    parser.add_argument("--threshold", type=float, default=0.02)
    parser.add_argument("--spread", type=float, default=0.015, help="standard deviation of a pair's log ratio")
    parser.add_argument(
        "--pair-error", type=float, default=0.0,
        help="each pair's own standard error (log scale), part of --spread; 0: the plan is not told it",
    )  # fmt: skip
    parser.add_argument(
        "--session-offset", type=float, default=0.0, help="an offset shared by all fresh pairs of a session (log scale)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--confidence", type=float, default=0.95, help="the level regressions are confirmed at")
    parser.add_argument("--sessions", type=int, default=0, help="simulate this many whole sessions per change")
    parser.add_argument("--tests", type=int, default=4, help="tests per simulated session")
    parser.add_argument("--first-spread", type=float, default=0.022, help="spread of the first pair's log ratio")
    parser.add_argument("--wave-s", type=float, default=2.3, help="seconds to start the first wave of workers")
    parser.add_argument("--start-s", type=float, default=0.45, help="seconds to start one pair after the first wave")
    parser.add_argument("--pair-s", type=float, default=0.7, help="seconds one fresh pair measures")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if args.sessions:
        sessions(args, rng)
        return 0
    print(f"{args.trials} confirmations per change; {args.pairs} pairs planned, threshold {args.threshold:.1%}, "
          f"spread between pairs {args.spread:.1%}")  # fmt: skip
    print("| true change | confirmed as a regression | pairs measured: mean | at most 3 | 4-5 | 6 | more |")
    print("|---|---|---|---|---|---|---|")
    for change in CHANGES:
        runs = [
            simulate(change, args.spread, args.pairs, args.threshold, rng, args.confidence, args.pair_error)
            for _ in range(args.trials)
        ]
        counts = [n for _, n in runs]

        def share(low: int, high: int, counts: list[int] = counts) -> str:
            return f"{sum(low <= n <= high for n in counts) / len(counts):.1%}"

        hits = sum(c for c, _ in runs) / len(runs)
        print(f"| {change:+.0%} | {hits:.2%} | {statistics.mean(counts):.2f} | {share(0, 3)} | {share(4, 5)} | "
              f"{share(6, 6)} | {share(7, 99)} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
