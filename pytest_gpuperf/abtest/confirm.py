"""Confirming a suspected compare-ref regression in fresh pairs of processes.

One pair of processes (the head's pytest and the base worker) carries an
offset that no number of rounds averages away: where a process's code and
data land in memory makes the same code a little faster or slower in that
process, and differently for each test. On the 2-core runner, the head/base
ratio of identical code came out between -5% and +3% across sessions while
each session's CI was +-0.5% (docs/detection.md). So a suspected regression
is measured again in ``pairs`` fresh process pairs, a head worker (the head's
checkout) next to a base worker (REF's worktree), each pair alternating rounds
as the first pair did. The verdict then comes from the spread of those
independent pair ratios (``stats.replicate_ratio_ci``), which includes the
offset, not from the rounds of one pair. The first pair only selects what to
confirm; it is not part of that estimate, so its selection cannot bias it.

The pairs are measured in two waves: first ``MIN_CONFIRMING_PAIRS``, then the
rest only if the first wave leaves a regression possible (``futile``): most
suspicions of unchanged code end after the first wave, and each pair costs
two process start-ups (about 2.5 s of CPU each on the 2-core runner). The
workers of a wave start when it is first needed and stay for later
suspicions; each collects only the files of the session's tests and skips
what only the first pair needs (CPU peak memory). Each fresh pair gets half
the measurement's time budget: a pair's own CI only has to be narrow next to
the spread between pairs.

When all planned pairs are in and their verdict is still open (not a
regression, yet the estimate is above half the threshold and the interval
reaches above it: ``undecided``), an extension wave of half as many pairs again
is measured and the verdict comes from all of them. On the 2-core runner, tests
slowed by 3% were left unconfirmed by six pairs reading +3.3% with one pair's
ratio at 0.990 (the interval touched 1) and by six reading +1.7% [-0.4%, +3.8%];
all 11 confirmations of unchanged code there read between -1.8% and +0.6% and
would not have been extended (docs/detection.md, eleventh session).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pytest_gpuperf import stats
from pytest_gpuperf.abtest.alternate import alternate
from pytest_gpuperf.abtest.remote import RemoteSide, WorkerLaunch, spawn_worker
from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.errors import WorkerError

MIN_CONFIRMING_PAIRS = 3  # fewer independent pair ratios give no usable interval


@dataclass
class Confirmation:
    """The median pair ratio of each fresh process pair that measured, and why others did not."""

    ratios: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    stopped_early: bool = False  # the first wave ruled a regression out (futile)
    extended: int = 0  # pairs measured beyond the planned ones because the verdict was open (undecided)

    def usable(self) -> bool:
        return len(self.ratios) >= MIN_CONFIRMING_PAIRS

    def interval(self, confidence: float) -> tuple[float, float, float, float]:
        """(ratio, low, high, p) over the pairs: see stats.replicate_ratio_ci."""
        return stats.replicate_ratio_ci(self.ratios, confidence)


class ConfirmationPool:
    """``pairs`` head workers and ``pairs`` base workers, started on first use."""

    def __init__(
        self,
        pairs: int,
        head_launch: Callable[[int], WorkerLaunch],
        base_launch: Callable[[int], WorkerLaunch],
        ref: str,
    ) -> None:
        self.pairs = pairs
        self._head_launch = head_launch
        self._base_launch = base_launch
        self.ref = ref
        self._sides: list[tuple[RemoteSide, RemoteSide]] = []
        self._broken: set[int] = set()

    def _start(self, count: int) -> list[tuple[RemoteSide, RemoteSide]]:
        """The first ``count`` pairs, starting those not yet running (all of a wave at once)."""
        started: list[tuple[RemoteSide, RemoteSide]] = []
        try:
            for j in range(len(self._sides), count):
                head = RemoteSide(spawn_worker(self._head_launch(j)), "at the head's checkout")
                try:
                    base = RemoteSide(spawn_worker(self._base_launch(j)), f"at {self.ref}")
                except BaseException:
                    head.close()
                    raise
                started.append((head, base))
        except BaseException:
            for head, base in started:
                head.close()
                base.close()
            raise
        self._sides.extend(started)
        return self._sides[:count]

    def confirm(
        self, test_id: str, key: str, settings: MeasureSettings, threshold: float,
        confidence: float = stats.DEFAULT_CONFIDENCE,
    ) -> Confirmation:  # fmt: skip
        """Measure ``key`` of ``test_id`` in fresh pairs, wave by wave; a pair that cannot is named, not fatal."""
        result = Confirmation()
        settings = confirming_settings(settings)
        first_wave = min(self.pairs, MIN_CONFIRMING_PAIRS)
        done = 0
        for wave_end in sorted({first_wave, self.pairs}):
            if not self._measure_wave(done, wave_end, test_id, key, settings, result):
                return result
            done = wave_end
            if done < self.pairs and result.usable() and futile(result.ratios, threshold, self.pairs):
                result.stopped_early = True
                return result
        if result.usable() and undecided(result.ratios, threshold, confidence):
            before = len(result.ratios)
            if self._measure_wave(done, self.pairs + extension_pairs(self.pairs), test_id, key, settings, result):
                result.extended = len(result.ratios) - before
        return result

    def _measure_wave(
        self, done: int, wave_end: int, test_id: str, key: str, settings: MeasureSettings, result: Confirmation
    ) -> bool:
        """Pairs ``done`` to ``wave_end - 1``, starting their workers first; False if they could not start."""
        try:
            sides = self._start(wave_end)
        except WorkerError as exc:
            result.problems.append(f"confirmation workers did not start: {exc}")
            return False
        for j in range(done, wave_end):
            self._measure_pair(j, *sides[j], test_id, key, settings, result)
        return True

    def _measure_pair(
        self, j: int, head: RemoteSide, base: RemoteSide, test_id: str, key: str,
        settings: MeasureSettings, result: Confirmation,
    ) -> None:  # fmt: skip
        if j in self._broken:
            return
        try:
            ratio, problem = self._one_pair(head, base, test_id, key, settings)
        except WorkerError as exc:
            self._broken.add(j)
            result.problems.append(f"pair {j + 1}: {str(exc).splitlines()[0]}")
            return
        if ratio is not None:
            result.ratios.append(ratio)
        elif problem:
            result.problems.append(f"pair {j + 1}: {problem}")

    @staticmethod
    def _one_pair(
        head: RemoteSide, base: RemoteSide, test_id: str, key: str, settings: MeasureSettings
    ) -> tuple[float | None, str]:
        for side in (head, base):
            side.wait_ready()
        problem = head.open(test_id, key) or base.open(test_id, key)
        if problem:
            head.drain()
            base.drain()
            return None, problem
        rounds = alternate(head.round, base.round, settings)
        if not rounds.complete:
            head.drain()
            base.drain()
            return None, head.test_note or base.test_note or "a side stopped"
        head.finish()
        base.finish()
        head.drain()
        base.drain()
        n = rounds.pairs
        ratio, *_ = stats.paired_median_ratio(rounds.head_rounds[:n], rounds.base_rounds[:n])
        return ratio, ""

    def close(self) -> None:
        """Stop every worker: all are asked first, then waited for (one by one took 2-3 s each)."""
        sides = [side for pair in self._sides for side in pair]
        self._sides = []
        for side in sides:
            with contextlib.suppress(Exception):
                side.request_stop()
        for side in sides:
            with contextlib.suppress(Exception):
                side.wait_stopped()


def futile(ratios: Sequence[float], threshold: float, planned: int) -> bool:
    """True when the pairs still to come could only confirm a regression by reading far above these.

    The verdict over all ``planned`` pairs needs their geometric mean ratio above
    ``1 + threshold``. With ``k`` ratios in hand whose log-mean is ``l``, the other
    ``planned - k`` would need a log-mean of ``(planned * L - k * l) / (planned - k)``
    (``L = log(1 + threshold)``). If that lies a whole threshold or more above ``l``,
    which is when ``l <= L * k / planned`` (half the threshold for 3 of 6 pairs), the
    rest would have to disagree with the first wave by more than the smallest change
    the gate reports, so they are not measured. Stopping can only turn a suspected
    regression into "unchanged", never make one, so it adds no false alarms; a real
    regression is lost only when its first wave reads at most half its size.
    """
    k = len(ratios)
    if k == 0 or k >= planned:
        return False
    mean_log = sum(math.log(r) for r in ratios) / k
    return mean_log <= math.log1p(threshold) * k / planned


def extension_pairs(planned: int) -> int:
    """How many pairs an open verdict adds to the ``planned`` ones: half as many again, at least one."""
    return max(1, planned // 2)


def undecided(ratios: Sequence[float], threshold: float, confidence: float) -> bool:
    """True when these pair ratios neither confirm a regression nor make one unlikely.

    Not a regression (the change is not above ``threshold`` with the whole interval
    above 1), yet the estimate is above half the threshold and the interval reaches
    above ``1 + threshold``: more pairs narrow the interval and settle it either way.
    Estimates at or below half the threshold are left alone, as ``futile`` leaves a
    first wave there: unchanged code's confirmations mostly end below it, so the
    extension costs them nothing.
    """
    if len(ratios) < MIN_CONFIRMING_PAIRS:
        return False
    ratio, low, high, _ = stats.replicate_ratio_ci(ratios, confidence)
    change = ratio - 1.0
    regression = change > threshold and low > 1.0
    return not regression and change > threshold / 2 and high > 1.0 + threshold


def confirming_settings(settings: MeasureSettings) -> MeasureSettings:
    """Half the time budget per fresh pair: what decides is the spread between pairs, not each pair's CI."""
    return dataclasses.replace(settings, max_time_s=max(settings.min_time_s, settings.max_time_s / 2))


def describe(ratios: Sequence[float], first_ratio: float) -> str:
    """``6 fresh process pairs (ratios 1.030, 1.052, ...); first pair 1.041``."""
    listed = ", ".join(f"{r:.3f}" for r in ratios)
    return f"{len(ratios)} fresh process pairs (ratios {listed}); first pair {first_ratio:.3f}"
