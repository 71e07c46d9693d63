"""One step: a commit measured against GOOD in a temporary worktree, and judged from its results file.

With a selection from your checkout (selection.py), your test files are placed in the commit's worktree first
(``engines.compare_ref.head_tests``, as ``--base-tests`` asks) and the step's compare-ref runs with the same
``--gpuperf-base-tests``, so that GOOD runs them too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_gpuperf.cli.bisect.model import Finding, Step, StepVerdict
from pytest_gpuperf.cli.bisect.repo import Repository
from pytest_gpuperf.cli.bisect.selection import Selection
from pytest_gpuperf.config import BaseTests
from pytest_gpuperf.errors import GpuperfError
from pytest_gpuperf.model import Comparison, Kind, SessionResults, Verdict

# pytest's exit codes (pytest.ExitCode) that still leave a judgeable results file
_PYTEST_RAN = (0, 1)
_PYTEST_MEANING = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
# The store URL is not inherited: a bisect's detached commits are no series' history.
_NOT_INHERITED = ("GPUPERF_HISTORY",)
_TAIL_LINES = 3  # lines of pytest's output quoted when a commit is skipped


def judge_session(commit: str, subject: str, session: SessionResults, pytest_exit: int) -> Step:
    """A step's verdict from its compare-ref results, by the gate's own rule (``verdict.fails``)."""
    from pytest_gpuperf.config import GateSettings
    from pytest_gpuperf.verdict import fails
    from pytest_gpuperf.verdict.judge import failing as failing_comparisons

    settings = GateSettings()  # not strict: only a regression makes a commit bad
    failing = [r for r in session.results if fails(r, settings)]
    if failing:
        regressions = [Finding.of(r.measurement.key, c) for r in failing
                       for c in failing_comparisons(r.comparisons, strict=False)]  # fmt: skip
        return Step(commit, subject, StepVerdict.BAD, tuple(regressions))
    if not session.results:
        return Step(commit, subject, StepVerdict.SKIP, reason="no measurement in the selected tests")
    if pytest_exit != 0:
        return Step(commit, subject, StepVerdict.SKIP, reason=f"pytest exited {pytest_exit}: a test failed "
                    "without a regression (see the step's log)")  # fmt: skip
    unresolved = [Finding.of(r.measurement.key, c) for r in session.results for c in r.comparisons if inconclusive(c)]
    if unresolved:
        return Step(commit, subject, StepVerdict.INCONCLUSIVE, tuple(unresolved), reason=INCONCLUSIVE_REASON)
    times = [(r.measurement.key, c) for r in session.results for c in r.comparisons if c.kind is Kind.TIME]
    largest = max(times, key=lambda kc: abs(kc[1].change or 0.0), default=None)
    return Step(commit, subject, StepVerdict.GOOD, (Finding.of(*largest),) if largest else ())


def inconclusive(c: Comparison) -> bool:
    """A time or memory change beyond its threshold that the gate did not call a regression.

    The gate passes such a change (it is not significant: +287%, 95% CI -43% to +316%, p=0.22),
    but a bisect that called the commit good would look for the slowdown after it and could name
    a later, innocent commit. The step is neither good nor bad: measured again, else left open.
    """
    worse_is_larger = c.kind in (Kind.TIME, Kind.MEMORY)
    return (
        worse_is_larger
        and c.verdict is not Verdict.REGRESSION
        and c.change is not None
        and c.threshold is not None
        and c.change > c.threshold
    )


INCONCLUSIVE_REASON = "a change beyond the threshold that is not significant (too noisy to call good or bad)"


def child_environment(env: Mapping[str, str], repo_root: Path, worktree: Path) -> dict[str, str]:
    """The step's environment: PYTHONPATH entries inside the repository moved to the worktree.

    Without that, ``PYTHONPATH=$PWD`` (or a folder of it) would import the user's checkout,
    not the commit under test.
    """
    child = {k: v for k, v in env.items() if k not in _NOT_INHERITED}
    if child.get("PYTHONPATH"):
        child["PYTHONPATH"] = os.pathsep.join(
            _moved(p, repo_root, worktree) for p in child["PYTHONPATH"].split(os.pathsep)
        )
    return child


def _moved(entry: str, repo_root: Path, worktree: Path) -> str:
    if not entry:
        return entry
    path = Path(entry).resolve()
    return str(worktree / path.relative_to(repo_root)) if path.is_relative_to(repo_root) else entry


@dataclass
class PytestProbe:
    """Measures a commit against GOOD: a worktree, ``pytest --gpuperf-compare-ref``, its results file."""

    repo: Repository
    good: str
    pytest_args: Sequence[str]
    subjects: Mapping[str, str]
    log_dir: Path | None = None
    timeout_s: float | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    python: str = sys.executable
    base_tests: BaseTests = BaseTests.AUTO  # which version of the tests each commit and GOOD run
    selection: Selection | None = None  # the selected tests in your checkout (None: each commit's own)

    def __call__(self, commit: str) -> Step:
        from pytest_gpuperf.engines.compare_ref.refs import BaseRef
        from pytest_gpuperf.engines.compare_ref.worktree import RefWorktree
        from pytest_gpuperf.errors import WorkerError

        subject = self.subjects.get(commit, "")
        try:
            worktree = RefWorktree(self.repo.root, BaseRef(commit, commit, self.repo.root)).create()
        except WorkerError as exc:
            return Step(commit, subject, StepVerdict.SKIP, reason=str(exc))
        try:
            assert worktree.path is not None
            placed = self._place_tests(worktree.path)
        except OSError as exc:
            worktree.close()
            return Step(commit, subject, StepVerdict.SKIP, reason=f"your tests could not be copied in: {exc}")
        try:
            step = self._run(commit, subject, worktree.path, worktree.tmp_dir)
        finally:
            worktree.close()
        if step.verdict is StepVerdict.SKIP and placed:
            step = dataclasses.replace(step, reason=f"{step.reason} ({placed})")
        return step

    def _place_tests(self, checkout: Path) -> str:
        """Your test files into the commit's worktree, as ``base_tests`` asks; what was placed, in words ('')."""
        from pytest_gpuperf.engines.compare_ref.head_tests import place_head_tests

        selection = self.selection
        if selection is None:
            return ""
        target = checkout / selection.rootdir.relative_to(self.repo.root)
        placed = place_head_tests(selection.rootdir, target, selection.node_ids, self.base_tests)
        inifile = selection.inifile
        if self.base_tests is BaseTests.HEAD and inifile is not None and inifile.is_relative_to(self.repo.root):
            shutil.copy2(inifile, checkout / inifile.relative_to(self.repo.root))  # as the step's own
        first = next(iter(placed.files.values()), None)
        if first is None:
            return ""
        more = f" and {len(placed.files) - 1} more" if len(placed.files) > 1 else ""
        return f"your {first.path}{more} ran at this commit: {first.why.replace('the base', 'the commit')}"

    def _run(self, commit: str, subject: str, checkout: Path, scratch: Path) -> Step:
        from pytest_gpuperf.report.results_json import load_results

        results = scratch / "results.json"
        log = scratch / "pytest.log"
        where = checkout / self.repo.cwd.relative_to(self.repo.root)
        command = [self.python, "-m", "pytest", f"--gpuperf-compare-ref={self.good}", f"--gpuperf-json={results}",
                   f"--gpuperf-base-tests={self.base_tests}", *self.pytest_args]  # fmt: skip
        code = run_logged(command, where if where.is_dir() else checkout,
                          child_environment(self.env, self.repo.root, checkout), log, self.timeout_s)  # fmt: skip
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                (self.log_dir / f"{commit[:12]}.log").write_bytes(log.read_bytes())
        if code is None:
            return Step(commit, subject, StepVerdict.SKIP, reason=f"timed out after {self.timeout_s:g} s")
        if code not in _PYTEST_RAN:
            meaning = _PYTEST_MEANING.get(code, "error")
            return Step(commit, subject, StepVerdict.SKIP, reason=f"pytest exited {code} ({meaning}): {_tail(log)}")
        if not results.is_file():
            return Step(commit, subject, StepVerdict.SKIP, reason=f"no results file: {_tail(log)}")
        try:
            session = load_results(results)
        except GpuperfError as exc:
            return Step(commit, subject, StepVerdict.SKIP, reason=str(exc))
        return judge_session(commit, subject, session, code)


def run_logged(
    command: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path, timeout_s: float | None
) -> int | None:
    """Run ``command`` with its output in ``log``; its exit code, or None when it ran past ``timeout_s``.

    Its own process group, so a timeout or an interrupt ends its workers too.
    """
    with log.open("wb") as out:
        process = subprocess.Popen(list(command), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _end(process)
            return None
        except BaseException:
            _end(process)
            raise


def _end(process: subprocess.Popen[bytes]) -> None:
    # SIGTERM first: pytest-gpuperf removes its worktrees on it (engines/compare_ref/worktree.py)
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(log: Path) -> str:
    try:
        # pytest's rules of = and ! around its summary lines say nothing in one line
        stripped = (line.strip().strip("=!").strip() for line in log.read_text(errors="replace").splitlines())
        lines = [line for line in stripped if line]
    except OSError:
        return "(no output)"
    return " | ".join(lines[-_TAIL_LINES:]) or "(no output)"
