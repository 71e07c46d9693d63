"""Confirming a suspected compare-ref regression in fresh pairs of processes.

Where a process's code and data land in memory gives it an offset no number of rounds
averages away, so a suspicion is measured again in fresh process pairs, whose ratios'
spread decides (``verdict/pairs.py``). Every pair's two workers are forked from the session's
zygote (``twins.py``), which imports torch once. The workers stay warm for the session: pair ``j``
takes reading ``j`` of every suspected test, so one test's readings come from different pairs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pytest_gpuperf import stats
from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.engines.compare_ref.alternate import alternate
from pytest_gpuperf.errors import WorkerError
from pytest_gpuperf.model import Verdict
from pytest_gpuperf.report.progress import Progress
from pytest_gpuperf.verdict import pairs, readings
from pytest_gpuperf.verdict.confirmation import oriented, oriented_threshold
from pytest_gpuperf.workers.remote import RemoteSide, WorkerLaunch
from pytest_gpuperf.workers.twins import Zygote

PAIR_PRECISION_FACTOR = 2.0  # a fresh pair's target CI half-width, relative to the measurement's
# A fresh pair's share of --gpuperf-max-time. On a quiet runner a pair reaches its target precision in about
# 0.3 s (docs/detection.md) and this budget never binds; on a loaded one no pair reaches it, the spread between
# pairs decides (about 3% under a load average of 5 on 2 CPUs), and the sequential test adds pairs as that
# spread asks: a quarter of the budget (0.5 s) a pair, not half, halves what each costs there.
PAIR_BUDGET_SHARE = 0.25
MAX_PAIR_PRECISION = 0.5  # still a fraction, as MeasureSettings requires


@dataclass(frozen=True)
class PairReading:
    """One fresh pair's reading of a test: the median of its paired round ratios, and the head's median."""

    ratio: float
    head_ns: float
    error: float | None = None  # the ratio's own standard error (log scale); None: too few rounds to tell


@dataclass
class Confirmation:
    """The reading of each fresh process pair that measured, and why others did not."""

    readings: list[PairReading] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    budget: int = 0  # the most pairs it may measure (--gpuperf-confirm-pairs)
    attempted: int = 0  # pairs measured or tried
    start_failed: bool = False  # the workers could not be started (noted once in ``problems``)

    @property
    def ratios(self) -> list[float]:
        return [r.ratio for r in self.readings]

    @property
    def errors(self) -> list[float]:
        """Each pair's own standard error, or none at all when one pair could not tell its own."""
        return errors_of(self.readings)

    def usable(self) -> bool:
        return len(self.readings) >= pairs.MIN_CONFIRMING_PAIRS

    def head_ns(self) -> float:
        """The head's time over the pairs: the geometric mean of its per-pair medians, as the ratio is of theirs."""
        return statistics.geometric_mean(r.head_ns for r in self.readings)


class ConfirmationPool:
    """Up to ``pairs`` head workers and as many base workers, started as the looks need them, forked from the
    session's zygote."""

    def __init__(
        self,
        pairs: int,
        head_launch: Callable[[int], WorkerLaunch],
        base_launch: Callable[[int], WorkerLaunch],
        ref: str,
        zygote: Zygote,
        progress: Progress | None = None,
    ) -> None:
        self.pairs = pairs
        self.zygote = zygote  # the session's, which the engine closes
        self.progress = progress or Progress()
        self._head_launch = head_launch
        self._base_launch = base_launch
        self.ref = ref
        self._sides: dict[int, tuple[RemoteSide, RemoteSide]] = {}
        self._broken: set[int] = set()  # pairs that broke in the current confirmation

    def _start(self, count: int) -> None:
        """Pairs ``0 .. count - 1`` running: those not yet started start at once, in turn order (``base_leads``)."""
        started: dict[int, tuple[RemoteSide, RemoteSide]] = {}
        launched: list[RemoteSide] = []
        try:
            for j in range(count):
                if j in self._sides:
                    continue
                order = [(self._head_launch(j), "at the head's checkout"), (self._base_launch(j), f"at {self.ref}")]
                (first, first_where), (second, second_where) = reversed(order) if base_leads(j) else order
                first_channel, second_channel = self.zygote.fork(first, second)
                launched += [RemoteSide(first_channel, first_where), RemoteSide(second_channel, second_where)]
                started[j] = (launched[-1], launched[-2]) if base_leads(j) else (launched[-2], launched[-1])
        except BaseException:
            for side in launched:
                side.close()
            raise
        self._sides.update(started)

    def _restart_broken(self) -> None:
        """Stop the pairs that broke in the last confirmation: the next reading that needs one starts it anew."""
        for j in sorted(self._broken):
            pair = self._sides.pop(j, None)
            for side in pair or ():
                with contextlib.suppress(Exception):
                    side.close()
        self._broken.clear()

    def confirm(
        self, test_id: str, key: str, settings: MeasureSettings, threshold: float,
        confidence: float = stats.DEFAULT_CONFIDENCE, suspected: Verdict = Verdict.REGRESSION,
    ) -> Confirmation:  # fmt: skip
        """Measure ``key`` of ``test_id`` in fresh pairs, as many as the plan asks for.

        The plan stops early in the direction of ``suspected`` (verdict/confirmation.py).
        A pair that cannot measure is named in ``problems``, not fatal.
        """
        result = Confirmation(budget=self.pairs)
        settings = confirming_settings(settings)
        waves = pairs.pair_waves(self.pairs)
        self._restart_broken()

        def take(j: int) -> PairReading | None:
            result.attempted = j + 1
            self.progress.confirming(key, j + 1, self.pairs)
            try:
                # the pairs a look needs start together: the first three at once (sharing the CPU
                # while they collect), each later one alone, forked from the warm zygote in ~0.4 s
                self._start(next(w for w in waves if w > j))
            except WorkerError as exc:
                if not result.start_failed:  # one note for the session's workers, not one per pair
                    result.start_failed = True
                    result.problems.append(f"confirmation workers did not start: {exc}")
                return None
            try:
                reading, problem = self._one_pair(*self._sides[j], test_id, key, settings, base_first=base_leads(j))
            except WorkerError as exc:
                self._broken.add(j)
                reading, problem = None, str(exc).splitlines()[0]
            if problem:
                result.problems.append(f"pair {j + 1}: {problem}")
            return reading

        def done(taken: list[PairReading], planned: int) -> bool:
            return pairs.pairs_done(
                oriented([r.ratio for r in taken], suspected), planned, budget=self.pairs,
                threshold=oriented_threshold(threshold, suspected), confidence=confidence, errors=errors_of(taken),
                improvement=suspected is Verdict.IMPROVEMENT,
            )  # fmt: skip

        result.readings = readings.take_readings(take, waves, done)
        return result

    @staticmethod
    def _one_pair(
        head: RemoteSide, base: RemoteSide, test_id: str, key: str, settings: MeasureSettings, *, base_first: bool
    ) -> tuple[PairReading | None, str]:
        first, second = (base, head) if base_first else (head, base)
        for side in (first, second):
            side.wait_ready()
        # ``again``: a test with several measurements is run anew for each one confirmed; a pair that read
        # the test's first measurement has run it to its end, past this one (drained below)
        problem = first.open(test_id, key, again=True) or second.open(test_id, key, again=True)
        rounds = None if problem else alternate(head.round, base.round, settings, base_first=base_first)
        if rounds is not None and rounds.complete:
            head.finish()
            base.finish()
        head.drain()
        base.drain()
        if rounds is None or not rounds.complete:
            return None, problem or head.test_note or base.test_note or "a side stopped"
        # a complete alternation ends between pairs: both sides have as many rounds
        ratio, *_ = stats.paired_median_ratio(rounds.head_rounds, rounds.base_rounds)
        half_width = rounds.half_width()  # at stats.DEFAULT_CONFIDENCE, as the alternation's stopping rule
        error = stats.error_from_half_width(half_width) if math.isfinite(half_width) else None
        return PairReading(ratio, statistics.median(rounds.head_rounds), error), ""

    def close(self) -> None:
        """Stop every worker: all are asked first, then waited for, so their exits overlap."""
        sides = [side for pair in self._sides.values() for side in pair]
        self._sides = {}
        for side in sides:
            with contextlib.suppress(Exception):
                side.request_stop()
        for side in sides:
            with contextlib.suppress(Exception):
                side.wait_stopped()


def errors_of(taken: Sequence[PairReading]) -> list[float]:
    """The pairs' own standard errors (a floor on their spread: ``stats.replicate_spread``); empty if one is unknown."""
    errors = [r.error for r in taken if r.error is not None]
    return errors if len(errors) == len(taken) else []


def base_leads(j: int) -> bool:
    """Whether the base side goes first in fresh pair ``j``: launched first, warmed up first, measured first.

    Counterbalanced: whatever going first carries lands on each side in half of the
    pairs, so it shows up as spread between pair ratios instead of as a change.
    """
    return j % 2 == 1


def confirming_settings(settings: MeasureSettings) -> MeasureSettings:
    """A fresh pair's rounds: a quarter of the time budget (PAIR_BUDGET_SHARE), and a target CI twice as wide
    (PAIR_PRECISION_FACTOR).

    What decides is the spread between pairs (about 1.5% on a shared CPU, docs/detection.md), of
    which a pair read to +-2% contributes its own error, about 1%; to +-1% it would take twice the rounds.
    """
    return dataclasses.replace(
        settings,
        max_time_s=max(settings.min_time_s, settings.max_time_s * PAIR_BUDGET_SHARE),
        target_precision=min(MAX_PAIR_PRECISION, settings.target_precision * PAIR_PRECISION_FACTOR),
    )


def describe(ratios: Sequence[float], first_ratio: float) -> str:
    """``6 fresh process pairs (ratios 1.030, 1.052, ...); first pair 1.041``."""
    listed = ", ".join(f"{r:.3f}" for r in ratios)
    return f"{len(ratios)} fresh process pairs (ratios {listed}); first pair {first_ratio:.3f}"
