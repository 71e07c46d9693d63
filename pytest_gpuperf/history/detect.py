"""Change points in a performance series: where its level moved, named by commit range.

The detector (docs/change-points.md explains it and the measurements behind it):

1. **Pool by commit.** Runs of one commit (several runners of a device class, reruns) become
   one level, so a change point always falls between two commits. Runners that read
   systematically apart are aligned first, from the commits they measured together.
2. **Weigh by precision.** Each run's own 95% interval gives its within-run variance; the
   series' between-run noise is estimated robustly from successive runs (the scaled MAD of
   first differences, which a few steps cannot inflate). A run weighs
   ``1 / (between-run variance + its own variance)``: a run whose samples scattered widely
   counts less, something a detector fed one number per run cannot do. A wild run, far from
   the runs before it and from the runs after it, counts less again (``_wild_inflation``;
   sooner when it is slower than both, as disturbed runs are): a run beside a step agrees
   with one side and keeps its weight.
3. **Binary segmentation with two tests.** In a stretch of commits, the split that
   maximises the weighted two-level statistic ``(mean_left - mean_right)^2 /
   (1/W_left + 1/W_right)`` is the candidate. It is kept when the share of seeded random
   orderings of the same runs over the commits' slots whose best split scores as high is at
   most ``alpha``, or when the F test of the same statistic against the runs' weighted
   scatter (Bonferroni over the splits) is at most ``param_alpha`` and the orderings do not
   call it chance (``param_gate``): the permutations assume nothing about the noise but need
   many runs, the F test reaches a short series. A kept split's both sides are searched again.
   **Placement** (``_place``): each kept split may move by up to two commits to where both
   sides' runs fit their levels best with a slowed run counted at a fixed cost, so a run
   slowed to the other side's level beside a step does not carry the split off.
4. **Creeps.** Neighbouring change points in the same direction that one ramp can span
   (fewer than ``max_ramp`` commits from first to last), and every single one, are also
   fitted as a ramp (old level, a linear slide over several commits, new level); when
   the ramp explains the data clearly better than the steps, one change point with
   ``gradual=True`` spans the slide. A single step becomes a ramp only when the ramp's gain
   holds with any one commit left out: one slowed run beside a step buys a ramp as much as a
   creep's whole slide does.
5. **Levels and interval.** Each change's levels come from the stretches either side (or the
   ramp); its 95% interval from their variances.
6. **Confirmation.** A split needs ``min_runs`` runs on each side closer to their own level
   than to the other's (one wild run can move a mean, not a level), and a change whose
   interval includes zero is not reported. A change with a level at either end of the
   series holding fewer than ``settle_runs`` runs is reported ``pending``: two slowed runs in
   a row read the same as a level's two runs, and (at the newest end) the next run tells them
   apart.

Values are compared in log space (relative changes) when all are positive, else as they are.
Everything is numpy; the permutations are seeded, so the same series gives the same answer.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from pytest_gpuperf.history.model import ChangeKind, ChangePoint, Point, Series

_Z95 = 1.959963984540054
# Below this relative spread two values are the same number (float noise, identical memory peaks).
_TINY = 1e-9
# Permutations are drawn in batches; a batch that already settles "not significant" ends the test.
_PERMUTATION_BATCH = 100
# Commits a runner must share with others before its offset from them is estimated.
_MIN_SHARED = 3
# Commits either side of a found split where _place may move it.
_PLACE_REACH = 2
# A run slower than its side's level by more than this many standard errors counts as slowed, at
# the cost of one this far off (about what a slowed run costs under a few percent of runs slowed
# by 10-40%); a step is moved only where it saves more than that.
_SLOWED = 3.0


@dataclass(frozen=True)
class DetectorConfig:
    """The detector's settings; the defaults are the ones measured in docs/change-points.md."""

    alpha: float = 0.0025  # a split is kept when its permutation p-value is at most this
    permutations: int = 399  # per test; the smallest reachable p-value is 1 / (permutations + 1)
    min_runs: int = 2  # runs needed on each side of a change (a lone run never makes one)
    settle_runs: int = 3  # runs each level of a change needs to be confirmed (fewer: pending; only at a series' ends)
    clip: float = 4.0  # a run farther than this many standard errors from both sides' medians is wild
    slow_clip: float = 2.5  # the same on the slow side (worse than both sides), where disturbed runs lie
    param_alpha: float = 0.005  # a split is also kept when its F-test p-value (splits counted) is at most this
    param_gate: float = 0.005  # ... and its permutation p-value at most this (short series: see _gate)
    max_ramp: int = 30  # the most commits a creep may span
    ramp_threshold: float = 5.0  # chi-square units a ramp must gain over one step, also with any one commit left out
    ramp_parameter_cost: float = 6.0  # chi-square units a ramp may lose per parameter it saves over several steps
    min_change: float = 0.0  # drop change points smaller than this relative change
    confirm: bool = True  # a change needs an interval without zero and min_runs runs on each side of it
    runner_offsets: bool = True  # align runners that read systematically apart (from shared commits)
    use_precision: bool = True  # weigh runs by their own intervals (off: the between-run noise only)
    leave_out_busy: bool = True  # runs measured busy have no say where enough quiet runs remain
    seed: int = 20261126

    def __post_init__(self) -> None:
        problems = []
        if not 0.0 < self.alpha < 1.0:
            problems.append(f"alpha must lie in (0, 1), got {self.alpha!r}")
        if self.permutations < 19:
            problems.append(f"permutations must be at least 19, got {self.permutations!r}")
        elif 0.0 < self.alpha < 1.0 and self.alpha * (self.permutations + 1) < 1:
            problems.append(
                f"alpha {self.alpha} is below the smallest p-value {self.permutations} permutations can give"
                f" (1/{self.permutations + 1}); raise permutations"
            )
        if self.min_runs < 1:
            problems.append(f"min_runs must be at least 1, got {self.min_runs!r}")
        if self.settle_runs < self.min_runs:
            problems.append(f"settle_runs must be at least min_runs ({self.min_runs}), got {self.settle_runs!r}")
        if self.clip <= 0 or self.slow_clip <= 0:
            problems.append(f"clip and slow_clip must be positive, got {self.clip!r} and {self.slow_clip!r}")
        if not 0.0 <= self.param_alpha < 1.0:
            problems.append(f"param_alpha must lie in [0, 1), got {self.param_alpha!r}")
        if not 0.0 < self.param_gate <= 1.0:
            problems.append(f"param_gate must lie in (0, 1], got {self.param_gate!r}")
        if self.max_ramp < 2:
            problems.append(f"max_ramp must be at least 2, got {self.max_ramp!r}")
        if self.ramp_threshold < 0 or self.ramp_parameter_cost < 0:
            problems.append(
                f"ramp_threshold and ramp_parameter_cost must not be negative,"
                f" got {self.ramp_threshold!r} and {self.ramp_parameter_cost!r}"
            )
        if self.min_change < 0:
            problems.append(f"min_change must not be negative, got {self.min_change!r}")
        if problems:
            raise ValueError("DetectorConfig: " + "; ".join(problems))


@dataclass
class _Commits:
    """The series pooled by commit: one level and its variance per commit."""

    commits: list[str]
    first_index: list[int]  # index in Series.points of each commit's earliest run
    runs: np.ndarray  # runs per commit
    level: np.ndarray  # weighted mean of the runs (log space when ``log``)
    var: np.ndarray  # its variance
    log: bool
    noise: float  # the between-run noise (standard deviation, same space as level)
    run_y: np.ndarray  # the runs' values grouped by commit, in commit order
    run_var: np.ndarray  # their variances (between-run noise plus their own)
    run_start: np.ndarray  # index in run_y of each commit's earliest run, plus the total at the end
    baseline_update: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @property
    def weight(self) -> np.ndarray:
        return 1.0 / self.var


@dataclass(frozen=True)
class _Step:
    at: int  # commit index of the first commit at the new level
    p_value: float


def _mad_sd(values: np.ndarray) -> float:
    if values.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(values - np.median(values))))


def _run_sd(point: Point, log: bool) -> float:
    """A run's own standard error from its 95% interval (0 when it has none)."""
    lo, hi = point.ci_low, point.ci_high
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        return 0.0
    if log:
        if lo <= 0:
            return 0.0
        return (math.log(hi) - math.log(lo)) / (2 * _Z95)
    return (hi - lo) / (2 * _Z95)


def _runner_offsets(y: np.ndarray, commit_of: np.ndarray, runners: list[str]) -> dict[str, float]:
    """Each runner's systematic offset from the others, from the commits they measured together.

    At every commit with runs from two or more runners, a run's difference from that commit's
    median is one reading of its runner's offset; a runner's offset is the median of its
    readings (at least ``_MIN_SHARED`` of them, else it is taken to measure like the rest).
    Runners seen only on commits of their own cannot be compared and keep offset 0.
    """
    names = sorted(set(runners))
    if len(names) < 2:
        return {}
    runner_of = np.array([names.index(r) for r in runners])
    readings: dict[int, list[float]] = {}
    order = np.argsort(commit_of, kind="stable")
    bounds = np.flatnonzero(np.diff(commit_of[order])) + 1
    for group in np.split(order, bounds):
        if np.unique(runner_of[group]).size < 2:
            continue
        centre = float(np.median(y[group]))
        for i in group:
            readings.setdefault(int(runner_of[i]), []).append(float(y[i]) - centre)
    return {names[r]: float(np.median(d)) for r, d in readings.items() if len(d) >= _MIN_SHARED}


def _quiet(series: Series, config: DetectorConfig) -> list[int]:
    """The indices of the runs the detector looks at: the runs not measured busy (``Point.busy``).

    A busy run (a contended CPU, a throttled GPU) reads slower for reasons of its own; it is
    stored and drawn, but gives a change point no say: a flat series with busy runs among quiet
    ones has no change point, and a step is placed by the quiet runs either side of it. A series
    with too few quiet runs to judge (:func:`shortest`) is judged on all its runs, busy ones
    included: on a runner busy all along, runs are compared with runs measured alike.
    """
    every = list(range(len(series.points)))
    if not config.leave_out_busy:
        return every
    quiet = [i for i in every if series.points[i].busy is None]
    return quiet if len(quiet) >= shortest(config) else every


def _pool(series: Series, config: DetectorConfig) -> _Commits | None:
    bad = [p.run_id for p in series.points if not math.isfinite(p.value)]
    if bad:
        raise ValueError(f"{series.key.label}: non-finite values in runs {', '.join(bad[:5])}")
    kept = _quiet(series, config)
    points = [series.points[i] for i in kept]
    values = np.array([p.value for p in points], dtype=float)
    if values.size == 0:
        return None
    log = bool(np.all(values > 0))
    y = np.log(values) if log else values
    own = np.array([_run_sd(p, log) if config.use_precision else 0.0 for p in points])
    codes: dict[str, int] = {}
    commit_of = np.array([codes.setdefault(p.commit, len(codes)) for p in points])
    offsets = _runner_offsets(y, commit_of, [p.runner for p in points]) if config.runner_offsets else {}
    if offsets:
        y = y - np.array([offsets.get(p.runner, 0.0) for p in points])
    # Between-run noise from successive runs: a step moves one difference, a creep a few,
    # the median absolute difference ignores both.
    diff_sd = _mad_sd(np.diff(y)) / math.sqrt(2) if y.size > 2 else 0.0
    between2 = max(diff_sd**2 - float(np.median(own**2)), 0.0)
    scale = float(np.median(np.abs(y))) if not log else 1.0
    floor = (_TINY * max(scale, 1.0)) ** 2
    run_var = between2 + own**2 + floor
    slow = 1.0 if series.better == "lower" else -1.0  # the side a disturbed run lands on
    clips = (config.clip, config.slow_clip)
    run_var = run_var * _wild_inflation(y, np.sqrt(run_var), clips, slow, 2 * config.min_runs + 1)

    w = 1.0 / run_var
    total_w = np.bincount(commit_of, weights=w)
    first = np.full(len(codes), len(points))
    np.minimum.at(first, commit_of, np.arange(len(points)))
    update = np.bincount(commit_of, weights=[p.baseline_update for p in points]) > 0
    grouped = np.argsort(commit_of, kind="stable")
    runs = np.bincount(commit_of)
    return _Commits(
        commits=list(codes),
        first_index=[kept[int(i)] for i in first],
        runs=runs,
        level=np.bincount(commit_of, weights=w * y) / total_w,
        var=1.0 / total_w,
        log=log,
        noise=math.sqrt(between2 + floor),
        run_y=y[grouped],
        run_var=run_var[grouped],
        run_start=np.concatenate([[0], np.cumsum(runs)]),
        baseline_update=update,
    )


def _side_medians(y: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Each run's median of the ``m`` runs before it and of the ``m`` runs after it (NaN where a side has none)."""
    from numpy.lib.stride_tricks import sliding_window_view

    pad = np.full(m, np.nan)
    before = np.nanmedian(sliding_window_view(np.concatenate([pad, y[:-1]]), m), axis=1) if y.size > 1 else pad[:1]
    after = np.nanmedian(sliding_window_view(np.concatenate([y[1:], pad]), m), axis=1) if y.size > 1 else pad[:1]
    return before, after


def _wild_inflation(y: np.ndarray, sd: np.ndarray, clips: tuple[float, float], slow: float, m: int) -> np.ndarray:
    """How much each run's variance grows because it agrees with neither side of it (1 for most runs).

    A change point splits the runs into a before and an after; a run at a step's edge sits
    with one of them, a wild run (a noisy neighbour, a throttled clock) with neither. A run
    farther than a clip of standard errors from both the median of the ``m`` runs before it
    and that of the ``m`` runs after it is wild, and its variance is scaled by ``(distance /
    clip)^2``: its pull on any level then falls as it lies farther off, so it can neither
    carry a split nor move one. A centred window (a Hampel filter) cannot tell the opening run
    of a new level beside a wild run from a wild run itself; the two sides can.

    ``clips`` is (fast side, slow side): a disturbance (a neighbour, a throttled clock, a
    page fault) makes a run slower, never faster than its code, so a run worse than both
    sides (``slow``: +1 where higher is worse, -1 where lower is) is wild from the smaller slow
    clip on; a run better than both sides is judged by the wider one. The oldest run is judged
    by the runs after it alone. The newest, where a new change shows first, has the run just
    before it as its other side: the next run of a new level agrees with the one before, a lone
    slowed run at the end (which at full weight made a change with another slowed run two
    commits before it) with neither.
    """
    if y.size < 3:
        return np.ones_like(y)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN side: the run's end of the series
            before, after = _side_medians(y, m)
        before[0] = after[0]  # the oldest run has only runs after it: judged by them alone
        # The newest run has no runs after it: its other side is the run just before it.
        after[-1] = y[-2]
        to_before, to_after = (y - before) * slow, (y - after) * slow
        nearer = np.where(np.abs(to_before) <= np.abs(to_after), to_before, to_after)  # signed, slow side positive
        clip = np.where(nearer > 0, clips[1], clips[0])
        far = np.abs(nearer) / sd / clip
    far = np.where(np.isnan(far), 0.0, far)
    return np.maximum(far, 1.0) ** 2


def _weighted_median(y: np.ndarray, w: np.ndarray) -> float:
    order = np.argsort(y)
    cum = np.cumsum(w[order])
    return float(y[order][np.searchsorted(cum, cum[-1] / 2)])


def _split_scores(sums: np.ndarray, w: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """The two-level statistic for a split before each commit 1..n-1 (rows: orderings).

    ``sums`` are the commits' sums of ``w * y`` with ``y`` centred on the weighted mean and
    ``w`` their weights, so with ``S`` the left sum of ``sums`` and
    ``W_l``/``W`` the left and total weights, ``(mean_l - mean_r)^2 / (1/W_l + 1/W_r)``
    is ``S^2 W / (W_l (W - W_l))``: a few array passes per ordering.
    ``allowed`` masks the split positions that leave enough runs on both sides.
    Returns (orderings, n-1), -inf where not allowed.
    """
    w_left = np.cumsum(w, axis=-1)[..., :-1]
    s_left = np.cumsum(sums, axis=-1)[..., :-1]
    total = float(w.sum(axis=-1).flat[0])
    score = s_left * s_left * total / (w_left * (total - w_left))
    return np.where(allowed, score, -np.inf)


def _allowed_splits(runs: np.ndarray, min_runs: int) -> np.ndarray:
    """Split positions (along the last axis) that leave ``min_runs`` runs on each side."""
    cum = np.cumsum(runs, axis=-1)
    left = cum[..., :-1]
    right = cum[..., -1:] - left
    return (left >= min_runs) & (right >= min_runs)


def _best_split(pooled: _Commits, lo: int, hi: int, config: DetectorConfig, rng: np.random.Generator) -> _Step | None:
    """The most likely split of commits [lo, hi) and its permutation p-value, if any is allowed.

    The permutations shuffle runs, not commits, over the same commit slots: three runners
    agreeing on one new commit are as unlikely under "nothing changed" as three in a row.
    """
    runs = pooled.runs[lo:hi]
    if runs.size < 2:
        return None
    allowed = _allowed_splits(runs, config.min_runs)
    if not allowed.any():
        return None
    first, last = int(pooled.run_start[lo]), int(pooled.run_start[hi])
    y, var = pooled.run_y[first:last], pooled.run_var[first:last]
    w = 1.0 / var
    centre = _weighted_median(y, w)
    if float(np.max(y) - np.min(y)) <= _TINY * max(abs(centre), 1.0):
        return None  # one value throughout: nothing can have changed
    y = y - float((w * y).sum() / w.sum())
    slots = pooled.run_start[lo:hi] - first  # each commit's earliest run in the slice

    def scores(yy: np.ndarray, ww: np.ndarray) -> np.ndarray:
        return _split_scores(np.add.reduceat(ww * yy, slots, axis=-1), np.add.reduceat(ww, slots, axis=-1), allowed)

    observed_scores = scores(y, w)
    k = int(np.argmax(observed_scores))
    observed = float(observed_scores[k])
    # Batches stop as soon as the p-value cannot reach alpha any more.
    exceed, done = 0, 0
    gate = _gate(config, y.size, int(slots[k + 1])) if config.param_alpha > 0 else config.alpha
    limit = math.floor(max(config.alpha, gate) * (config.permutations + 1)) - 1  # most exceedances that can pass
    while done < config.permutations:
        batch = min(_PERMUTATION_BATCH, config.permutations - done)
        perm = rng.permuted(np.tile(np.arange(y.size), (batch, 1)), axis=1)
        best = scores(y[perm], w[perm]).max(axis=1)
        exceed += int(np.count_nonzero(best >= observed * (1 - 1e-12)))
        done += batch
        if exceed > limit:
            break
    p_value = (exceed + 1) / (done + 1)
    if config.alpha < p_value <= gate:
        p_value = min(p_value, _parametric_p(y, w, observed, int(allowed.sum()), config))
    return _Step(at=lo + k + 1, p_value=p_value)


def _gate(config: DetectorConfig, runs: int, left: int) -> float:
    """The permutation p-value up to which the F test may still keep a split.

    The F test assumes normal noise; real timing noise has heavy tails, and a few slowed runs
    at a series' end can pass it where the orderings of the same runs say "chance" (p above
    ``param_gate``). Where the orderings cannot say more, the gate opens and the F test
    decides: ``left`` of ``runs`` runs have ``comb(runs, left)`` orderings (3 + 3 runs have
    20), and since the best of several splits is tested, the smallest p-value they give is
    a few times one over that (measured: 1.7 times at 6 runs, 3.2 times at 10); the gate
    stays above eight times it, clear of the 399 permutations' own scatter.
    """
    return max(config.param_gate, 8.0 / math.comb(runs, left))


def _parametric_p(y: np.ndarray, w: np.ndarray, gain: float, splits: int, config: DetectorConfig) -> float:
    """The best split's F-test p-value, times the splits tried, scaled onto ``alpha``; 1 when it fails.

    The permutation test needs many runs: 4 + 4 runs have 70 orderings, so its p-value cannot
    go below 1/70, and 3 + 3 runs have 20. With every run weighted by its own precision (its
    interval) and the between-run noise, the two-level fit's ``gain`` over one level against
    the weighted residual scatter it leaves (``y.size - 2`` degrees of freedom) is an F
    statistic when nothing changed and the noise is normal. Only the weights' ratios matter,
    so an uncertain noise estimate cannot make it bolder. Its p-value, multiplied by the
    number of splits tried (Bonferroni), must reach ``param_alpha``; the p-value reported is
    ``alpha`` scaled by how far past ``param_alpha`` it went. ``y`` is centred on its weighted mean.
    """
    from scipy.special import fdtrc  # the F distribution's survival function, without scipy.stats' import

    dof = y.size - 2
    if dof < 1 or config.param_alpha <= 0 or gain <= 0:
        return 1.0
    within = float((w * y * y).sum()) - gain
    if within <= 0:
        return config.alpha * _TINY  # every run exactly on its level
    p = float(fdtrc(1, dof, gain / (within / dof))) * splits
    return p * config.alpha / config.param_alpha if p <= config.param_alpha else 1.0


def _supported(pooled: _Commits, lo: int, at: int, hi: int, min_runs: int) -> bool:
    """Whether ``min_runs`` runs on each side of the split sit on their side's half.

    A mean can move for one wild run; a level has moved when several runs moved. Each side
    needs ``min_runs`` runs closer to its own level than to the other's.
    """
    first, mid, last = (int(pooled.run_start[i]) for i in (lo, at, hi))
    y, w = pooled.run_y, 1.0 / pooled.run_var
    before = float((w[first:mid] * y[first:mid]).sum() / w[first:mid].sum())
    after = float((w[mid:last] * y[mid:last]).sum() / w[mid:last].sum())
    middle, up = (before + after) / 2, after > before
    left = int(np.count_nonzero((y[first:mid] < middle) == up))
    right = int(np.count_nonzero((y[mid:last] > middle) == up))
    return left >= min_runs and right >= min_runs


def _segment(pooled: _Commits, config: DetectorConfig, rng: np.random.Generator) -> list[_Step]:
    steps: list[_Step] = []
    stack = [(0, pooled.level.size)]
    while stack:
        lo, hi = stack.pop()
        step = _best_split(pooled, lo, hi, config, rng)
        if step is None or step.p_value > config.alpha:
            continue
        if config.confirm and not _supported(pooled, lo, step.at, hi, config.min_runs):
            continue
        steps.append(step)
        stack += [(lo, step.at), (step.at, hi)]
    return sorted(steps, key=lambda s: s.at)


def _side_cost(y: np.ndarray, sd: np.ndarray, slow: float) -> float:
    """How badly runs ``y`` fit one level, a run slowed past ``_SLOWED`` standard errors at a fixed cost.

    The level is the weighted mean of the runs not slowed past ``_SLOWED`` from the side's
    weighted median (a slowed run says nothing about the level). A run costs its squared
    standardised residual, except on the slow side (``slow``: +1 where higher is worse) past
    ``_SLOWED``, where it costs ``_SLOWED ** 2`` however far off: a disturbance slows a run by an
    amount of its own, so a slowed run fits every level alike, while a run as far off on the
    fast side is that unlikely under any level. Slowed runs are the exception: a side whose
    runs are half or more "slowed" sits at another level (infinite cost).
    """
    w = 1.0 / (sd * sd)
    level = _weighted_median(y, w)
    for _ in range(2):
        kept = (y - level) * slow / sd <= _SLOWED
        level = float((w[kept] * y[kept]).sum() / w[kept].sum())
    r = (y - level) * slow / sd
    slowed = r > _SLOWED
    if 2 * int(np.count_nonzero(slowed)) >= y.size:
        return math.inf
    return float(np.where(slowed, _SLOWED**2, r * r).sum())


def _place(pooled: _Commits, steps: list[_Step], config: DetectorConfig, slow: float) -> list[_Step]:
    """Each step moved, within ``_PLACE_REACH`` commits, to where its runs fit two levels best, slowed runs allowed.

    The search's statistic weighs every run by its precision and reads a slowed run at face
    value: a run slowed by a disturbance to the new level just before a rise, or back to the
    old level just after a speed-up, can carry the split two commits off. Around each kept
    split, the commit where both sides' runs fit their levels best (:func:`_side_cost`) is
    where the change is placed, if that saves more than one slowed run's cost over the
    search's own place; the p-value stays the search's.
    """
    placed = list(steps)
    y, sd = pooled.run_y, np.sqrt(pooled.run_var)
    for i, step in enumerate(steps):
        lo = placed[i - 1].at if i else 0
        hi = steps[i + 1].at if i + 1 < len(steps) else pooled.level.size
        first, last = int(pooled.run_start[lo]), int(pooled.run_start[hi])

        def cost(at: int, first: int = first, last: int = last) -> float:
            mid = int(pooled.run_start[at])
            return _side_cost(y[first:mid], sd[first:mid], slow) + _side_cost(y[mid:last], sd[mid:last], slow)

        best, best_cost = step.at, cost(step.at)
        for at in range(max(lo + 1, step.at - _PLACE_REACH), min(hi, step.at + _PLACE_REACH + 1)):
            mid = int(pooled.run_start[at])
            if at == step.at or mid - first < config.min_runs or last - mid < config.min_runs:
                continue
            if config.confirm and not _supported(pooled, lo, at, hi, config.min_runs):
                continue
            moved = cost(at) + _SLOWED**2
            if moved < best_cost:
                best, best_cost = at, moved
        placed[i] = _Step(at=best, p_value=step.p_value)
    return placed


@dataclass(frozen=True)
class _Fit:
    """Two levels over commits [lo, hi): ``before`` up to ``start``, ``after`` from ``end``."""

    start: int  # last commit at the old level
    end: int  # first commit at the new level
    before: float
    after: float
    diff_var: float  # variance of after - before
    ssr: float  # weighted residual sum of squares (chi-square units)


def _ramp_fits(y: np.ndarray, w: np.ndarray, starts: range, ends: range, max_span: int) -> _Fit | None:
    """The best ramp (a linear slide from ``start`` to ``end``, local indices) by weighted least squares.

    Every (start, end) pair is fitted at once: ``y = a + d * shape`` with ``shape`` 0 up to
    ``start``, 1 from ``end``, linear between.
    """
    pairs = np.array([(s, e) for s in starts for e in ends if 2 <= e - s <= max_span], dtype=float).reshape(-1, 2)
    if pairs.size == 0:
        return None
    centre = float((w * y).sum() / w.sum())
    y = y - centre  # the expanded sum of squares below would lose digits on raw log levels
    idx = np.arange(y.size, dtype=float)
    shape = np.clip((idx[None, :] - pairs[:, :1]) / (pairs[:, 1:] - pairs[:, :1]), 0.0, 1.0)
    sw, sy = w.sum(), (w * y).sum()
    sx, sxx, sxy = shape @ w, (shape * shape) @ w, shape @ (w * y)
    det = sw * sxx - sx * sx
    ok = det > 1e-12 * sw * sw
    if not ok.any():
        return None
    det = np.where(ok, det, 1.0)
    d = (sw * sxy - sx * sy) / det
    a = (sy - d * sx) / sw
    # ssr = sum w (y - a - d x)^2, expanded so no residual matrix is built
    syy = (w * y * y).sum()
    ssr = syy - 2 * a * sy - 2 * d * sxy + a * a * sw + 2 * a * d * sx + d * d * sxx
    ssr = np.where(ok, ssr, np.inf)
    best = int(np.argmin(ssr))
    start, end = int(pairs[best, 0]), int(pairs[best, 1])
    before, after = float(a[best]) + centre, float(a[best] + d[best]) + centre
    return _Fit(start, end, before, after, float(sw / det[best]), float(max(ssr[best], 0.0)))


def _staircase_ssr(y: np.ndarray, w: np.ndarray, cuts: list[int]) -> float:
    total = 0.0
    bounds = [0, *cuts, y.size]
    for lo, hi in itertools.pairwise(bounds):
        yy, ww = y[lo:hi], w[lo:hi]
        mean = (ww * yy).sum() / ww.sum()
        total += float((ww * (yy - mean) ** 2).sum())
    return total


def _ramp_gain_without_each(y: np.ndarray, w: np.ndarray, cut: int, starts: range, ends: range, max_span: int) -> float:
    """The least a ramp gains over the step at ``cut`` (chi-square units) when any one commit is left out.

    A step with one slowed run beside it (or one run from the noise's heavy tail) can owe a
    ramp its whole gain to that run; a creep's gain comes from every run of its slide. Each
    commit in turn weighs nothing, both shapes are refitted, and the smallest gain is kept.
    """
    least = math.inf
    for k in range(y.size):
        wk = w.copy()
        wk[k] = 0.0
        if wk[:cut].sum() <= 0 or wk[cut:].sum() <= 0:
            continue
        ramp = _ramp_fits(y, wk, starts, ends, max_span)
        if ramp is None:
            return -math.inf
        least = min(least, _staircase_ssr(y, wk, [cut]) - ramp.ssr)
    return least


def _ramp_wins(
    y: np.ndarray, w: np.ndarray, cuts: list[int], starts: range, ends: range, ramp: _Fit, config: DetectorConfig
) -> bool:
    """Whether ``ramp`` replaces the steps at ``cuts`` (local indices) as one gradual change.

    One step (3 parameters: two levels, a commit) against a ramp (4: two levels, start and
    end): the ramp must gain ``ramp_threshold`` chi-square units, on all commits and with any
    one left out (:func:`_ramp_gain_without_each`). A staircase of m steps spends 2m + 1
    parameters, so from two steps on the simpler ramp may fit worse by ``ramp_parameter_cost``
    for each parameter it saves and still win.
    """
    gain = _staircase_ssr(y, w, cuts) - ramp.ssr
    if len(cuts) > 1:
        return gain > -config.ramp_parameter_cost * (2 * len(cuts) - 3)
    if gain <= config.ramp_threshold:
        return False
    return _ramp_gain_without_each(y, w, cuts[0], starts, ends, config.max_ramp) > config.ramp_threshold


@dataclass(frozen=True)
class _Change:
    last_good: int  # commit indices
    first_bad: int
    before: float
    after: float
    diff_var: float
    p_value: float
    gradual: bool


def _two_levels(pooled: _Commits, lo: int, at: int, hi: int) -> tuple[float, float, float]:
    w = pooled.weight
    wl, wr = w[lo:at].sum(), w[at:hi].sum()
    before = float((w[lo:at] * pooled.level[lo:at]).sum() / wl)
    after = float((w[at:hi] * pooled.level[at:hi]).sum() / wr)
    return before, after, float(1 / wl + 1 / wr)


def _changes(pooled: _Commits, steps: list[_Step], placed: list[_Step], config: DetectorConfig) -> list[_Change]:
    """Steps grouped into creeps where a ramp explains them better, each with its levels.

    Ramp and steps are compared as the search fitted them (``steps``: least squares both);
    a change that stays a step is reported where :func:`_place` put it (``placed``).
    """
    cuts = [s.at for s in steps]
    bounds = [0, *cuts, pooled.level.size]
    sign = []
    for i in range(len(cuts)):
        before, after, _ = _two_levels(pooled, bounds[i], cuts[i], bounds[i + 2])
        sign.append(np.sign(after - before))
    # Clusters: consecutive steps in one direction that one ramp can span. A ramp starts
    # before its first step and ends at or after its last, so a cluster's steps lie fewer
    # than max_ramp commits apart; a cluster grown step by step past that (a creep and a
    # later step in the same direction) could be fitted by no ramp and left the creep steps.
    clusters: list[list[int]] = []
    for i in range(len(cuts)):
        if clusters and sign[i] == sign[clusters[-1][-1]] and cuts[i] - cuts[clusters[-1][0]] < config.max_ramp:
            clusters[-1].append(i)
        else:
            clusters.append([i])
    changes: list[_Change] = []
    for cluster in clusters:
        first, last = cluster[0], cluster[-1]
        # The fit looks at most two ramp lengths either side: enough to pin both levels, and
        # the cost stays flat however long the series.
        lo = max(bounds[first], cuts[first] - 2 * config.max_ramp)
        hi = min(bounds[last + 2], cuts[last] + 2 * config.max_ramp)
        p_value = min(steps[i].p_value for i in cluster)
        y, w = pooled.level[lo:hi], pooled.weight[lo:hi]
        local = [cuts[i] - lo for i in cluster]
        # Both full levels keep min_runs commits: a ramp's end level resting on one run
        # would bend to fit that run's noise.
        starts = range(max(config.min_runs - 1, local[0] - config.max_ramp), local[0])
        ends = range(local[-1], min(y.size - config.min_runs + 1, local[-1] + config.max_ramp))
        ramp = _ramp_fits(y, w, starts, ends, config.max_ramp)
        if ramp is not None and _ramp_wins(y, w, local, starts, ends, ramp, config):
            changes.append(
                _Change(lo + ramp.start, lo + ramp.end, ramp.before, ramp.after, ramp.diff_var, p_value, gradual=True)
            )
            continue
        at = [0, *(s.at for s in placed), pooled.level.size]
        for i in cluster:
            before, after, var = _two_levels(pooled, at[i], at[i + 1], at[i + 2])
            changes.append(_Change(at[i + 1] - 1, at[i + 1], before, after, var, steps[i].p_value, gradual=False))
    return changes


def _relative(pooled: _Commits, before: float, after: float) -> float:
    if pooled.log:
        return math.expm1(after - before)
    return (after - before) / abs(before) if before else math.inf


def _level(pooled: _Commits, level: float) -> float:
    return math.exp(level) if pooled.log else level


def _dispersion(pooled: _Commits, changes: list[_Change]) -> float:
    """How much wider the residuals are than the weights say (at least 1): widens the intervals."""
    n = pooled.level.size
    cuts = sorted({c.first_bad for c in changes})
    dof = n - len(cuts) - 1
    if dof < 3:
        return 1.0
    ssr = _staircase_ssr(pooled.level, pooled.weight, cuts)
    return max(1.0, ssr / dof)


def shortest(config: DetectorConfig | None = None) -> int:
    """The fewest runs a series needs before the detector says anything about it.

    ``min_runs + 1`` runs either side of a change: with fewer, neither test can tell a step of
    any size from noise (the F test has ``runs - 2`` degrees of freedom; 2 + 2 runs leave two).
    """
    return 2 * ((config or DetectorConfig()).min_runs + 1)


def too_short(series: Series, config: DetectorConfig | None = None) -> bool:
    """Whether ``series`` has too few runs for a change to be found or ruled out (see :func:`shortest`)."""
    config = config or DetectorConfig()
    judged = [series.points[i] for i in _quiet(series, config)]
    return len(judged) < shortest(config) or len({p.commit for p in judged}) < 2


def find_changes(series: Series, config: DetectorConfig | None = None) -> list[ChangePoint]:
    """The change points of ``series``, oldest first.

    Each names ``last_good``/``first_bad`` commits, the levels before and after (in the
    series' unit), the relative change with its 95% interval, the permutation p-value, and
    whether it is a regression or an improvement for the series' ``better`` direction, and
    whether it is still ``pending`` (a level at the series' newest or oldest end holding fewer
    than ``settle_runs`` runs).
    A series :func:`too_short` to tell has none.
    """
    config = config or DetectorConfig()
    if series.better not in ("lower", "higher"):
        raise ValueError(f"{series.key.label}: better must be 'lower' or 'higher', got {series.better!r}")
    pooled = _pool(series, config)  # first: a non-finite value is an error however short the series
    if pooled is None or too_short(series, config):
        return []
    rng = np.random.default_rng(config.seed)
    steps = _segment(pooled, config, rng)
    if not steps:
        return []
    placed = _place(pooled, steps, config, 1.0 if series.better == "lower" else -1.0)
    changes = _changes(pooled, steps, placed, config)
    inflate = math.sqrt(_dispersion(pooled, changes))
    total_runs = len(series.points)
    found: list[ChangePoint] = []
    for change in changes:
        rel = _relative(pooled, change.before, change.after)
        if abs(rel) < config.min_change:
            continue
        half = _Z95 * math.sqrt(change.diff_var) * inflate
        diff = change.after - change.before
        lo_rel, hi_rel = (
            _relative(pooled, change.before, change.after - half),
            _relative(pooled, change.before, change.after + half),
        )
        if config.confirm and lo_rel <= 0 <= hi_rel:
            continue  # significant by rank of orderings, but its level interval spans no change
        worse = diff > 0 if series.better == "lower" else diff < 0
        index = pooled.first_index[change.first_bad]
        # Runs from the series' start to the old level's end, and from the new level's start to the series' end:
        # only a change at one of the series' ends can have fewer than settle_runs on a side.
        side_runs = min(
            int(pooled.run_start[change.last_good + 1]), int(pooled.run_start[-1] - pooled.run_start[change.first_bad])
        )
        found.append(
            ChangePoint(
                key=series.key,
                last_good=pooled.commits[change.last_good],
                first_bad=pooled.commits[change.first_bad],
                index=index,
                before=_level(pooled, change.before),
                after=_level(pooled, change.after),
                change=rel,
                ci_low=min(lo_rel, hi_rel),
                ci_high=max(lo_rel, hi_rel),
                p_value=change.p_value,
                kind=ChangeKind.REGRESSION if worse else ChangeKind.IMPROVEMENT,
                runs_after=total_runs - index,
                gradual=change.gradual,
                pending=side_runs < config.settle_runs,
                p_floor=1.0 / (config.permutations + 1),
                unit=series.unit,
                details={
                    "commits_spanned": change.first_bad - change.last_good,
                    "noise": pooled.noise,
                    "baseline_update": bool(pooled.baseline_update[change.last_good + 1 : change.first_bad + 1].any()),
                },
            )
        )
    return found
