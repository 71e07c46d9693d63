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
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_gpuperf.readings import take_readings
from pytest_gpuperf.verdict.pairs import confirmed, pair_waves, pairs_done

CHANGES = (0.0, 0.01, 0.02, 0.03, 0.05, 0.10)


def simulate(change: float, spread: float, pairs: int, threshold: float, rng: random.Random) -> tuple[bool, int]:
    """One confirmation: (confirmed as a regression, pairs measured)."""
    mean = math.log1p(change)

    def take(_: int) -> float:
        return math.exp(rng.gauss(mean, spread))

    def done(ratios: list[float], planned: int) -> bool:
        return pairs_done(ratios, planned, pairs=pairs, threshold=threshold, confidence=0.95)

    ratios = take_readings(take, pair_waves(pairs), done)
    return confirmed(ratios, threshold, 0.95), len(ratios)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--pairs", type=int, default=6, help="--gpuperf-confirm-pairs")
    parser.add_argument("--threshold", type=float, default=0.02)
    parser.add_argument("--spread", type=float, default=0.015, help="standard deviation of a pair's log ratio")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"{args.trials} confirmations per change; {args.pairs} pairs planned, threshold {args.threshold:.1%}, "
          f"spread between pairs {args.spread:.1%}")  # fmt: skip
    print("| true change | confirmed as a regression | pairs measured: mean | at most 3 | 4-5 | 6 | more |")
    print("|---|---|---|---|---|---|---|")
    for change in CHANGES:
        runs = [simulate(change, args.spread, args.pairs, args.threshold, rng) for _ in range(args.trials)]
        counts = [n for _, n in runs]

        def share(low: int, high: int, counts: list[int] = counts) -> str:
            return f"{sum(low <= n <= high for n in counts) / len(counts):.1%}"

        hits = sum(c for c, _ in runs) / len(runs)
        print(f"| {change:+.0%} | {hits:.2%} | {statistics.mean(counts):.2f} | {share(0, 3)} | {share(4, 5)} | "
              f"{share(6, 6)} | {share(7, 99)} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
