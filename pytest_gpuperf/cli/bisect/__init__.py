"""``gpuperf bisect GOOD BAD -- PYTEST_ARGS``: the first commit where the selected tests got slower.

The selected tests are yours: collected in your checkout first (selection.py), placed in each
step's worktree where the commit lacks them (``--base-tests``: ``auto``; ``head``: always; ``base``:
never) and run at GOOD by compare-ref's ``--gpuperf-base-tests``, so a perf test newer than GOOD
still bisects.

The candidates are ``git rev-list --first-parent --ancestry-path GOOD..BAD``, oldest first
(BAD last): the commits of BAD's mainline that came after GOOD. Each step checks one of them
out in a temporary worktree (``engines.compare_ref.worktree.RefWorktree``, with its clean-up on exit and
signals) and runs ``python -m pytest --gpuperf-compare-ref=GOOD --gpuperf-json=FILE
PYTEST_ARGS`` there: a same-run measurement of that commit against GOOD, judged by the
compare-ref rules. A commit is *bad* when the gate would fail one of its measurements
(``verdict.fails``: a regression of time, peak memory or a metric), *good* when every
measurement passed, and *skipped* (as ``git bisect skip``) when it cannot be judged: no
results file, pytest ended with an error or interruption, no measurement, or a test that
failed without a regression.

BAD is measured first: a BAD that is not slower than GOOD ends the search (exit 1), since
then there is nothing to find. The search is a binary search over the candidates between the
last good and the first bad one, about log2(n) steps; a skipped commit makes it try the
untested commit nearest the middle instead, and where only skipped commits separate the last
good from the first bad one, the answer is that range.

May import: ``engines.compare_ref`` (the worktree), ``verdict``, ``report`` and the leaves; runs pytest as a
child process, never in-process.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.cli.bisect.model import (
    EXIT_BAD_INPUT,
    EXIT_FOUND,
    EXIT_NOT_REPRODUCED,
    EXIT_RANGE,
    EXIT_USAGE,
    BisectError,
    Finding,
    Outcome,
    Status,
    Step,
    StepVerdict,
)
from pytest_gpuperf.cli.bisect.probe import PytestProbe, child_environment, judge_session
from pytest_gpuperf.cli.bisect.render import measuring_line, render, step_line, to_json
from pytest_gpuperf.cli.bisect.repo import candidates, open_repository, resolve
from pytest_gpuperf.cli.bisect.search import expected_steps, search
from pytest_gpuperf.cli.bisect.selection import Selection, collect
from pytest_gpuperf.config import BaseTests
from pytest_gpuperf.errors import ConfigError

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FOUND",
    "EXIT_NOT_REPRODUCED",
    "EXIT_RANGE",
    "EXIT_USAGE",
    "BisectError",
    "Finding",
    "Outcome",
    "PytestProbe",
    "Request",
    "Selection",
    "Status",
    "Step",
    "StepVerdict",
    "candidates",
    "check_pytest_args",
    "child_environment",
    "expected_steps",
    "judge_session",
    "open_repository",
    "render",
    "resolve",
    "run",
    "search",
    "to_json",
]

# Options each step sets itself; the same in PYTEST_ARGS would silently replace them.
_OWN_OPTIONS = ("--gpuperf-compare-ref", "--gpuperf-json", "--gpuperf-update-baseline", "--gpuperf-base-tests")


@dataclass(frozen=True)
class Request:
    good: str
    bad: str
    pytest_args: tuple[str, ...]
    json_path: Path | None = None
    log_dir: Path | None = None
    timeout_s: float | None = None
    base_tests: BaseTests = BaseTests.AUTO  # the version of the tests each commit and GOOD run (selection.py)


def check_pytest_args(args: Sequence[str]) -> None:
    """ConfigError naming an option that each step sets itself (compare-ref, results file, update)."""
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in _OWN_OPTIONS:
            own = " (from --base-tests)" if name == "--gpuperf-base-tests" else " (compare-ref against GOOD)"
            raise ConfigError(f"{arg!r} after --: each step sets {name} itself{own}")


def run(request: Request, out: Callable[[str], object], cwd: Path | None = None) -> Outcome:
    """Resolve the refs, list the candidates and search, writing each step to ``out`` as it ends."""
    from pytest_gpuperf.files import write_atomic

    check_pytest_args(request.pytest_args)
    repo = open_repository(cwd or Path.cwd())
    good = resolve(repo, "GOOD", request.good)
    bad = resolve(repo, "BAD", request.bad)
    listed = candidates(repo, good, bad)
    subjects = dict(listed)
    commits = [c for c, _ in listed]
    out(f"gpuperf bisect: {len(commits)} commit(s) after GOOD {good[:12]} up to BAD {bad[:12]} "
        f"(about {expected_steps(len(commits))} steps); BAD first\n")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="gpuperf-bisect-") as scratch:
        selection = None
        if request.base_tests is not BaseTests.BASE:  # your tests, to run where a commit lacks them (or always)
            selection = collect(repo.cwd, request.pytest_args, Path(scratch), child_environment(os.environ,
                                repo.root, repo.root))  # fmt: skip
            where = "at every commit and at GOOD" if request.base_tests is BaseTests.HEAD else (
                "where a commit or GOOD lacks them")  # fmt: skip
            out(f"gpuperf bisect: your {len(selection.node_ids)} selected test(s) run {where} "
                f"(--base-tests={request.base_tests})\n")  # fmt: skip
    probe = PytestProbe(repo, good, request.pytest_args, subjects, request.log_dir, request.timeout_s,
                        base_tests=request.base_tests, selection=selection)  # fmt: skip
    count = 0

    def measure(commit: str) -> Step:  # a step takes minutes: say which commit is being measured
        out(measuring_line(count + 1, commit, subjects.get(commit, "")) + "\n")
        return probe(commit)

    def report(step: Step) -> None:
        nonlocal count
        count += 1
        out(step_line(count, step, bad) + "\n")

    outcome = search(commits, measure, good=good, on_step=report, subjects=subjects)
    out(render(outcome))
    if request.json_path is not None:
        write_atomic(request.json_path, to_json(outcome))
    return outcome
