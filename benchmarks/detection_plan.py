"""Compare-ref's sequential plan, simulated: error rates at the threshold, pairs measured, what sessions cost.

    python benchmarks/detection_plan.py --trials 20000 --pairs 12 --threshold 0.02 --spread 0.0073 --pair-error 0.005
    python benchmarks/detection_plan.py --sessions 4000 --spread 0.0073 --first-spread 0.011 --pair-error 0.005

Each simulated confirmation draws fresh-pair ratios whose logs are normal around the true change with
the given spread between pairs (``--spread``; each pair's own error ``--pair-error`` is part of it and
the floor the test knows of), takes them through the plan the engine uses (``readings.take_readings``
over ``verdict.pairs.pair_waves``, stopped by ``verdict.pairs.pairs_done``) and reads the outcome from
the last look (``verdict.pairs.pairs_look``): beyond the threshold (a regression), within it, or not
resolved. It prints, per true change, the share of each outcome and the pairs measured, and checks the
stated rates: at a change of exactly the threshold, at most ``(1 - confidence) / 2`` beyond and four
times that within (``verdict.pairs.within_error_rate``). No processes, no torch: the plan's
statistics alone, so that a change to the plan can be weighed before a session is timed. A benchmark,
not a test: CI does not run it. Results: docs/detection.md.

``--sessions N`` simulates whole compare-ref sessions of ``--tests`` tests: each test's first pair reads
a ratio spread by ``--first-spread`` (the offset between its two processes and its rounds' error
``--round-error`` together); the screen (``verdict.rules.Screen``) suspects it past half the threshold,
or where its rounds' interval reaches across the threshold, or an improvement past the threshold; the
fresh pairs decide, a regression at ``--confidence``, an improvement at ``IMPROVEMENT_CONFIDENCE``, through
one pool of workers kept warm for the session, started as the looks need them. It prints per true change
the sessions alarmed, the tests caught (failed), the tests not resolved, improvements reported, the
pairs started and measured and the seconds the confirmations add (``--wave-s`` for the first wave of three
pairs, ``--start-s`` for each pair started after it, ``--pair-s`` per pair measured), and the share of
tests caught among those whose threshold plus published detectable change (``verdict.detectable``) lies
at or below the true change: a change the published value says fails with probability ``POWER`` (80%).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

from pytest_gpuperf.stats import format_level
from pytest_gpuperf.verdict.confirmation import IMPROVEMENT_CONFIDENCE
from pytest_gpuperf.verdict.detectable import from_interval, from_replicates
from pytest_gpuperf.verdict.pairs import (
    error_rate,
    oriented_threshold,
    pair_waves,
    pairs_done,
    pairs_look,
    within_error_rate,
)
from pytest_gpuperf.verdict.readings import take_readings
from pytest_gpuperf.verdict.rules import SCREEN_SHARE, screen_boundary
from pytest_gpuperf.verdict.sequential import Outcome

CHANGES = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.10)


def pair_reader(mean: float, spread: float, error: float, rng: random.Random) -> Callable[[int], float]:
    """One fresh pair's ratio: its own measurement error ``error`` plus an offset of its own, ``spread`` in all."""
    offset = math.sqrt(max(0.0, spread**2 - error**2))
    return lambda _: math.exp(rng.gauss(mean, offset) + rng.gauss(0.0, error))


@dataclass(frozen=True)
class Confirmed:
    """One simulated confirmation: its outcome, the pairs it measured and the detectable change it published."""

    outcome: Outcome
    pairs: int
    detectable: float


def simulate(
    change: float, spread: float, budget: int, threshold: float, rng: random.Random, confidence: float = 0.95,
    error: float = 0.0,
) -> Confirmed:  # fmt: skip
    """One confirmation of a suspected change of ``change`` (turned so that it reads above 1)."""
    take = pair_reader(math.log1p(change), spread, error, rng)

    def errors(ratios: list[float]) -> list[float]:
        return [error] * len(ratios) if error else []

    def done(ratios: list[float], planned: int) -> bool:
        return pairs_done(ratios, planned, budget=budget, threshold=threshold, confidence=confidence,
                          errors=errors(ratios))  # fmt: skip

    ratios = take_readings(take, pair_waves(budget), done)
    look = pairs_look(ratios, budget=budget, threshold=threshold, confidence=confidence, errors=errors(ratios))
    published = from_replicates(
        look.spread, len(ratios), threshold, error_rate(confidence), budget, within_error_rate(confidence)
    ).change
    return Confirmed(look.outcome, len(ratios), published)


@dataclass
class SessionTally:
    """What one simulated session did, test by test."""

    caught: int = 0  # tests failed (a confirmed regression)
    unresolved: int = 0
    improved: int = 0
    first_waves: int = 0  # 0 or 1
    later: int = 0  # pairs started after the first wave
    measured: int = 0  # pairs measured
    honest: tuple[int, int] = (0, 0)  # tests whose threshold + published value is below the change: (caught, all)


def session(change: float, args: argparse.Namespace, rng: random.Random) -> SessionTally:
    """One compare-ref session of ``args.tests`` tests, each with a true change of ``change``."""
    tally = SessionTally()
    started = 0
    waves_at = pair_waves(args.pairs)  # the pairs started when a look needs pair j (engines.compare_ref.confirm)
    offset = rng.gauss(0.0, args.session_offset)
    log_threshold = math.log1p(args.threshold)
    z = NormalDist().inv_cdf(0.5 + args.confidence / 2.0)
    honest_caught = honest_all = 0
    for _ in range(args.tests):
        first = rng.gauss(math.log1p(change), args.first_spread)
        half_width = z * args.round_error
        published = from_interval(args.round_error, 1, args.threshold, z, "round pairs").change
        regression = first > math.log(screen_boundary(args.threshold, args.screen_share)) or (
            first - half_width < log_threshold < first + half_width)  # fmt: skip
        improvement = first < -math.log1p(args.threshold) and first + half_width < 0
        outcome = Outcome.WITHIN
        if regression or improvement:
            # an improvement's ratios are turned, and it is confirmed at the stricter level
            sign, level = (1.0, args.confidence) if regression else (-1.0, IMPROVEMENT_CONFIDENCE)
            threshold = oriented_threshold(args.threshold, not regression)
            take = pair_reader(sign * (math.log1p(change) + offset), args.spread, args.pair_error, rng)
            own = args.pair_error

            def done(
                ratios: list[float],
                planned: int,
                threshold: float = threshold,
                level: float = level,
                own: float = own,
                faster: bool = not regression,
            ) -> bool:
                return pairs_done(ratios, planned, budget=args.pairs, threshold=threshold, confidence=level,
                                  errors=[own] * len(ratios) if own else [], improvement=faster)  # fmt: skip

            ratios = take_readings(take, pair_waves(args.pairs), done)
            look = pairs_look(ratios, budget=args.pairs, threshold=threshold, confidence=level,
                              errors=[own] * len(ratios) if own else [], improvement=not regression)  # fmt: skip
            outcome = look.outcome
            published = from_replicates(
                look.spread,
                len(ratios),
                args.threshold,
                error_rate(level),
                args.pairs,
                within_error_rate(level, not regression),
            ).change
            tally.measured += len(ratios)
            while started < len(ratios):
                now = next(w for w in waves_at if w > started)
                tally.first_waves, tally.later = (1, tally.later) if started == 0 else (
                    tally.first_waves, tally.later + now - started)  # fmt: skip
                started = now
            if not regression:
                tally.improved += outcome is Outcome.BEYOND
                outcome = Outcome.WITHIN
        caught = outcome is Outcome.BEYOND
        tally.caught += caught
        tally.unresolved += outcome is Outcome.OPEN
        # the published value promises a change of threshold + it fails with probability POWER
        if change > 0 and math.log1p(args.threshold) + math.log1p(published) <= math.log1p(change):
            honest_all += 1
            honest_caught += caught
    tally.honest = (honest_caught, honest_all)
    return tally


def sessions(args: argparse.Namespace, rng: random.Random) -> None:
    print(f"{args.sessions} sessions per change, {args.tests} tests each; first pair spread {args.first_spread:.2%} "
          f"(rounds' own error {args.round_error:.2%}), fresh pairs {args.spread:.2%} (own error "
          f"{args.pair_error:.2%}); regressions at {format_level(args.confidence)}, improvements at "
          f"{format_level(IMPROVEMENT_CONFIDENCE)}; at most {args.pairs} pairs, "
          f"threshold {args.threshold:.1%}")  # fmt: skip
    print(
        "| true change | sessions alarmed | tests caught | tests not resolved | improvements reported "
        "| first waves: mean | pairs started later: mean | pairs: mean | added s: mean "
        "| caught where threshold + published value <= the change |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    tests = args.sessions * args.tests
    for change in CHANGES:
        runs = [session(change, args, rng) for _ in range(args.sessions)]
        waves = statistics.mean(r.first_waves for r in runs)
        later = statistics.mean(r.later for r in runs)
        pairs = statistics.mean(r.measured for r in runs)
        alarmed = sum(r.caught > 0 for r in runs) / len(runs)
        caught = sum(r.caught for r in runs) / tests
        unresolved = sum(r.unresolved for r in runs) / tests
        improved = sum(r.improved > 0 for r in runs) / len(runs)
        added = waves * args.wave_s + later * args.start_s + pairs * args.pair_s
        honest_caught, honest_all = (sum(r.honest[i] for r in runs) for i in (0, 1))
        honest = f"{honest_caught / honest_all:.1%} of {honest_all}" if honest_all else "-"
        print(f"| {change:+.0%} | {alarmed:.2%} | {caught:.2%} | {unresolved:.2%} | {improved:.2%} | {waves:.2f} "
              f"| {later:.2f} | {pairs:.2f} | {added:.1f} | {honest} |")  # fmt: skip


def confirmations(args: argparse.Namespace, rng: random.Random) -> int:
    """The table of single confirmations; exit 1 where a stated rate at the threshold is exceeded beyond chance."""
    print(f"{args.trials} confirmations per change; at most {args.pairs} pairs, threshold {args.threshold:.1%}, "
          f"spread between pairs {args.spread:.2%} (own error {args.pair_error:.2%})")  # fmt: skip
    print("| true change | beyond (a regression) | within | not resolved | pairs: mean | published value: median |")
    print("|---|---|---|---|---|---|")
    rate, within_rate = error_rate(args.confidence), within_error_rate(args.confidence)
    exceeded = False
    for change in sorted({*CHANGES, args.threshold}):
        runs = [simulate(change, args.spread, args.pairs, args.threshold, rng, args.confidence, args.pair_error)
                for _ in range(args.trials)]  # fmt: skip
        share = {o: sum(r.outcome is o for r in runs) / len(runs) for o in Outcome}
        pairs = statistics.mean(r.pairs for r in runs)
        published = statistics.median(r.detectable for r in runs)
        print(f"| {change:+.1%} | {share[Outcome.BEYOND]:.2%} | {share[Outcome.WITHIN]:.2%} | "
              f"{share[Outcome.OPEN]:.2%} | {pairs:.2f} | {published:.2%} |")  # fmt: skip
        if change == args.threshold:

            def past(stated: float, seen: float) -> bool:  # beyond three standard errors of a share
                return seen > stated + 3.0 * math.sqrt(stated * (1 - stated) / args.trials)

            exceeded = past(rate, share[Outcome.BEYOND]) or past(within_rate, share[Outcome.WITHIN])
    print(f"at the threshold: stated at most {rate:.2%} beyond and {within_rate:.2%} within"
          + (" - EXCEEDED" if exceeded else ""))  # fmt: skip
    return 1 if exceeded else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--pairs", type=int, default=12, help="--gpuperf-confirm-pairs: the most pairs measured")
    parser.add_argument("--threshold", type=float, default=0.02)
    parser.add_argument("--spread", type=float, default=0.0073, help="standard deviation of a pair's log ratio")
    parser.add_argument(
        "--pair-error", type=float, default=0.005,
        help="each pair's own standard error (log scale), part of --spread; 0: the plan is not told it",
    )  # fmt: skip
    parser.add_argument(
        "--session-offset", type=float, default=0.0, help="an offset shared by all fresh pairs of a session (log scale)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--confidence", type=float, default=0.95, help="the level regressions are confirmed at")
    parser.add_argument("--sessions", type=int, default=0, help="simulate this many whole sessions per change")
    parser.add_argument("--tests", type=int, default=4, help="tests per simulated session")
    parser.add_argument("--first-spread", type=float, default=0.011, help="spread of the first pair's log ratio")
    parser.add_argument("--round-error", type=float, default=0.004, help="the first pair's rounds' own standard error")
    parser.add_argument(
        "--screen-share",
        type=float,
        default=SCREEN_SHARE,
        help="the share of the threshold (log scale) past which the first pair suspects a regression",
    )
    parser.add_argument("--wave-s", type=float, default=1.25, help="seconds to start the first wave of workers")
    parser.add_argument("--start-s", type=float, default=0.4, help="seconds to start one pair after the first wave")
    parser.add_argument("--pair-s", type=float, default=0.28, help="seconds one fresh pair measures")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if args.sessions:
        sessions(args, rng)
        return 0
    return confirmations(args, rng)


if __name__ == "__main__":
    raise SystemExit(main())
