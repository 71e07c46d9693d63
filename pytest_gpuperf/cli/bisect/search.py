"""The binary search over the candidates, with skips as ``git bisect skip`` treats them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pytest_gpuperf.cli.bisect.model import BisectError, Outcome, Status, Step, StepVerdict

Probe = Callable[[str], Step]


def search(candidates: Sequence[str], probe: Probe, *, good: str = "", on_step: Callable[[Step], None] | None = None,
           subjects: Mapping[str, str] | None = None) -> Outcome:  # fmt: skip
    """Bisect ``candidates`` (oldest first, BAD last; GOOD, known good, precedes them) with ``probe``.

    Commits after a bad one are taken to be bad too (each is measured against GOOD, so a
    slowdown stays until something undoes it), as ``git bisect`` assumes. An inconclusive step
    (a change beyond the threshold, not significant) is measured once more; a second
    inconclusive answer counts as a skip, so the answer is a range rather than a guess.
    """
    if not candidates:
        raise BisectError("no commits between GOOD and BAD")
    steps: list[Step] = []

    def measure_once(index: int) -> StepVerdict:
        step = probe(candidates[index])
        steps.append(step)
        if on_step is not None:
            on_step(step)
        return step.verdict

    def measure(index: int) -> StepVerdict:
        verdict = measure_once(index)
        return measure_once(index) if verdict is StepVerdict.INCONCLUSIVE else verdict

    def outcome(status: Status, suspects: Sequence[str] = ()) -> Outcome:
        return Outcome(good, candidates[-1], tuple(candidates), tuple(steps), status, tuple(suspects),
                       dict(subjects or {}))  # fmt: skip

    first = measure(len(candidates) - 1)
    if first is StepVerdict.GOOD:
        return outcome(Status.BAD_NOT_SLOWER)
    if first in (StepVerdict.SKIP, StepVerdict.INCONCLUSIVE):
        return outcome(Status.BAD_UNTESTABLE)
    last_good, first_bad = -1, len(candidates) - 1  # indices; -1 is GOOD itself
    skipped: set[int] = set()
    while (index := _next_index(last_good, first_bad, skipped)) is not None:
        verdict = measure(index)
        if verdict is StepVerdict.GOOD:
            last_good = index
        elif verdict is StepVerdict.BAD:
            first_bad = index
        else:  # skipped, or inconclusive twice
            skipped.add(index)
    if first_bad - last_good == 1:
        return outcome(Status.FOUND, [candidates[first_bad]])
    return outcome(Status.RANGE, candidates[last_good + 1 : first_bad + 1])


def _next_index(last_good: int, first_bad: int, skipped: set[int]) -> int | None:
    """The untested, unskipped index strictly between the two nearest the middle (the lower on a tie)."""
    middle = (last_good + first_bad) / 2
    open_ = [i for i in range(last_good + 1, first_bad) if i not in skipped]
    return min(open_, key=lambda i: (abs(i - middle), i)) if open_ else None


def expected_steps(count: int) -> int:
    """About how many steps ``count`` candidates take without skips: BAD, then a binary search."""
    return 1 + max(count - 1, 0).bit_length()
