"""``gpuperf bisect GOOD BAD -- PYTEST_ARGS``: the first commit where the selected tests got slower.

The candidates are ``git rev-list --first-parent --ancestry-path GOOD..BAD``, oldest first
(BAD last): the commits of BAD's mainline that came after GOOD. Each step checks one of them
out in a temporary worktree (``abtest.worktree.RefWorktree``, with its clean-up on exit and
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
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pytest_gpuperf.errors import ConfigError, GpuperfError
from pytest_gpuperf.model import Comparison, Kind, SessionResults

EXIT_FOUND = 0
EXIT_NOT_REPRODUCED = 1  # BAD is not slower than GOOD, or BAD itself cannot be measured
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3  # an unknown ref, GOOD not an ancestor of BAD, not a git repository
EXIT_RANGE = 4  # skipped commits hide which of a range is the first bad one

JSON_FORMAT = "gpuperf-bisect"
JSON_VERSION = 1

# pytest's exit codes (pytest.ExitCode) that still leave a judgeable results file
_PYTEST_RAN = (0, 1)
_PYTEST_MEANING = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
# Options each step sets itself; the same in PYTEST_ARGS would silently replace them.
_OWN_OPTIONS = ("--gpuperf-compare-ref", "--gpuperf-json", "--gpuperf-update-baseline")
# The store URL is not inherited: a bisect's detached commits are no series' history.
_NOT_INHERITED = ("GPUPERF_HISTORY",)
_TAIL_LINES = 3  # lines of pytest's output quoted when a commit is skipped


class BisectError(GpuperfError):
    """Input ``gpuperf bisect`` cannot work with: an unknown or unsafe ref, an empty range."""


class StepVerdict(str, enum.Enum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


class Status(str, enum.Enum):
    FOUND = "found"  # one first bad commit
    RANGE = "range"  # skipped commits hide which of ``suspects`` is the first bad one
    BAD_NOT_SLOWER = "bad-not-slower"  # BAD measured as good as GOOD: nothing to find
    BAD_UNTESTABLE = "bad-untestable"  # BAD itself could not be measured

    @property
    def exit_code(self) -> int:
        return {Status.FOUND: EXIT_FOUND, Status.RANGE: EXIT_RANGE}.get(self, EXIT_NOT_REPRODUCED)


@dataclass(frozen=True)
class Finding:
    """One comparison of a step's results file: a regression's evidence, or a good step's largest change."""

    key: str  # <node id>::<measurement name>
    metric: str  # "time.p50", "memory.peak_allocated", "metric.<name>"
    verdict: str
    current: float
    reference: float | None  # GOOD's value in the same run
    unit: str
    change: float | None
    ci_low: float | None  # of the ratio current / reference
    ci_high: float | None
    p_value: float | None
    evidence: str

    @classmethod
    def of(cls, key: str, c: Comparison) -> Finding:
        return cls(key, c.metric, c.verdict.value, c.current, c.baseline, c.unit, c.change, c.ci_low, c.ci_high,
                   c.p_value, c.evidence)  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One measured commit."""

    commit: str
    subject: str
    verdict: StepVerdict
    findings: tuple[Finding, ...] = ()  # bad: every failing comparison; good: the largest time change
    reason: str = ""  # skip: why the commit could not be judged


@dataclass(frozen=True)
class Outcome:
    """What the search found, with every step it took (in the order taken)."""

    good: str
    bad: str
    candidates: tuple[str, ...]  # oldest first, BAD last
    steps: tuple[Step, ...]
    status: Status
    suspects: tuple[str, ...] = ()  # FOUND: the first bad commit; RANGE: the commits one of which is
    subjects: Mapping[str, str] = field(default_factory=dict)

    @property
    def first_bad(self) -> str | None:
        return self.suspects[0] if self.status is Status.FOUND else None

    def step_of(self, commit: str) -> Step | None:
        return next((s for s in self.steps if s.commit == commit), None)


# --- the search ----------------------------------------------------------------------------------

Probe = Callable[[str], Step]


def search(candidates: Sequence[str], probe: Probe, *, good: str = "", on_step: Callable[[Step], None] | None = None,
           subjects: Mapping[str, str] | None = None) -> Outcome:  # fmt: skip
    """Bisect ``candidates`` (oldest first, BAD last; GOOD, known good, precedes them) with ``probe``.

    Commits after a bad one are taken to be bad too (each is measured against GOOD, so a
    slowdown stays until something undoes it), as ``git bisect`` assumes.
    """
    if not candidates:
        raise BisectError("no commits between GOOD and BAD")
    steps: list[Step] = []

    def measure(index: int) -> StepVerdict:
        step = probe(candidates[index])
        steps.append(step)
        if on_step is not None:
            on_step(step)
        return step.verdict

    def outcome(status: Status, suspects: Sequence[str] = ()) -> Outcome:
        return Outcome(good, candidates[-1], tuple(candidates), tuple(steps), status, tuple(suspects),
                       dict(subjects or {}))  # fmt: skip

    first = measure(len(candidates) - 1)
    if first is StepVerdict.GOOD:
        return outcome(Status.BAD_NOT_SLOWER)
    if first is StepVerdict.SKIP:
        return outcome(Status.BAD_UNTESTABLE)
    last_good, first_bad = -1, len(candidates) - 1  # indices; -1 is GOOD itself
    skipped: set[int] = set()
    while (index := _next_index(last_good, first_bad, skipped)) is not None:
        verdict = measure(index)
        if verdict is StepVerdict.GOOD:
            last_good = index
        elif verdict is StepVerdict.BAD:
            first_bad = index
        else:
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


# --- one step: judge a results file ---------------------------------------------------------------


def judge_session(commit: str, subject: str, session: SessionResults, pytest_exit: int) -> Step:
    """A step's verdict from its compare-ref results, by the gate's own rule (``verdict.fails``)."""
    from pytest_gpuperf.config import GateSettings
    from pytest_gpuperf.verdict import fails

    settings = GateSettings()  # not strict: only a regression makes a commit bad
    failing = [r for r in session.results if fails(r, settings)]
    if failing:
        regressions = [Finding.of(r.measurement.key, c) for r in failing for c in r.comparisons
                       if c.verdict.value == "regression"]  # fmt: skip
        return Step(commit, subject, StepVerdict.BAD, tuple(regressions))
    if not session.results:
        return Step(commit, subject, StepVerdict.SKIP, reason="no measurement in the selected tests")
    if pytest_exit != 0:
        return Step(commit, subject, StepVerdict.SKIP, reason=f"pytest exited {pytest_exit}: a test failed "
                    "without a regression (see the step's log)")  # fmt: skip
    times = [(r.measurement.key, c) for r in session.results for c in r.comparisons if c.kind is Kind.TIME]
    largest = max(times, key=lambda kc: abs(kc[1].change or 0.0), default=None)
    return Step(commit, subject, StepVerdict.GOOD, (Finding.of(*largest),) if largest else ())


# --- one step: measure a commit in a worktree ------------------------------------------------------


@dataclass(frozen=True)
class Repository:
    root: Path
    cwd: Path  # where the user ran the command, inside ``root``


def open_repository(cwd: Path) -> Repository:
    import git

    try:
        with git.Repo(cwd, search_parent_directories=True) as repo:
            root = repo.working_tree_dir
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BisectError(f"{cwd} is not inside a git repository") from None
    if root is None:
        raise BisectError(f"{cwd} is in a bare repository: bisect needs a work tree")
    return Repository(Path(root).resolve(), cwd.resolve())


def resolve(repo: Repository, which: str, ref: str) -> str:
    """``ref`` as a full commit hash, with abtest's resolution; one that could be read as an option is refused."""
    from pytest_gpuperf.abtest.worktree import resolve_ref

    if ref.startswith("-"):
        raise BisectError(f"{which} {ref!r} starts with '-': refused, git would read it as an option")
    try:
        return resolve_ref(repo.root, ref).commit
    except ConfigError:
        raise BisectError(f"{which} {ref!r} is no commit, branch or tag in {repo.root}") from None


def candidates(repo: Repository, good: str, bad: str) -> list[tuple[str, str]]:
    """(commit, subject) of BAD's first-parent line after GOOD, oldest first; BisectError if there are none."""
    import git

    with git.Repo(repo.root) as r:
        try:
            r.git.merge_base("--is-ancestor", good, bad)
        except git.GitCommandError:
            raise BisectError(f"GOOD {good[:12]} is not an ancestor of BAD {bad[:12]}") from None
        text = r.git.log("--first-parent", "--ancestry-path", "--format=%H%x00%s", f"{good}..{bad}", "--")
    found = [tuple(line.split("\0", 1)) for line in text.splitlines() if line]
    if not found:
        raise BisectError(f"no commit between GOOD and BAD: both are {good[:12]}")
    return [(c, s) for c, s in reversed(found)]


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

    def __call__(self, commit: str) -> Step:
        from pytest_gpuperf.abtest.worktree import BaseRef, RefWorktree
        from pytest_gpuperf.errors import WorkerError

        subject = self.subjects.get(commit, "")
        try:
            worktree = RefWorktree(self.repo.root, BaseRef(commit, commit, self.repo.root)).create()
        except WorkerError as exc:
            return Step(commit, subject, StepVerdict.SKIP, reason=str(exc))
        try:
            assert worktree.path is not None
            return self._run(commit, subject, worktree.path, worktree.tmp_dir)
        finally:
            worktree.close()

    def _run(self, commit: str, subject: str, checkout: Path, scratch: Path) -> Step:
        from pytest_gpuperf.report.results_json import load_results

        results = scratch / "results.json"
        log = scratch / "pytest.log"
        where = checkout / self.repo.cwd.relative_to(self.repo.root)
        command = [self.python, "-m", "pytest", f"--gpuperf-compare-ref={self.good}", f"--gpuperf-json={results}",
                   *self.pytest_args]  # fmt: skip
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
    # SIGTERM first: pytest-gpuperf removes its worktrees on it (abtest/worktree.py)
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


# --- the report ---------------------------------------------------------------------------------


def finding_text(f: Finding) -> str:
    from pytest_gpuperf.report.units import format_change, format_value

    ci = ""
    if f.ci_low is not None and f.ci_high is not None:
        ci = f", 95% CI {format_change(f.ci_low - 1)} to {format_change(f.ci_high - 1)}"
    p = f", p={f.p_value:.2g}" if f.p_value is not None else ""
    before = format_value(f.reference, f.unit) if f.reference is not None else "-"
    return f"{f.key} {f.metric}: {before} -> {format_value(f.current, f.unit)} ({format_change(f.change)}{ci}{p})"


def step_line(number: int, step: Step, bad: str) -> str:
    label = " (BAD)" if step.commit == bad else ""
    head = f"step {number}: {step.commit[:12]}{label} {step.verdict.value:<4}"
    if step.verdict is StepVerdict.SKIP:
        detail = f"skipped: {step.reason}"
    elif step.findings:
        detail = finding_text(step.findings[0])
        if len(step.findings) > 1:
            detail += f" (and {len(step.findings) - 1} more)"
    else:
        detail = "no time comparison"
    return f"{head}  {detail}  [{step.subject}]"


def render(outcome: Outcome) -> str:
    """The summary after the steps: the first bad commit with its evidence, or why there is none."""
    bad = outcome.bad[:12]
    if outcome.status is Status.BAD_NOT_SLOWER:
        return (
            f"BAD {bad} is not slower than GOOD {outcome.good[:12]}: no selected measurement regressed, so "
            "there is no first bad commit to find (a wider selection or a lower threshold may show one)\n"
        )
    if outcome.status is Status.BAD_UNTESTABLE:
        step = outcome.step_of(outcome.bad)
        reason = step.reason if step else "?"
        return f"BAD {bad} could not be measured, so the slowdown is not reproduced: {reason}\n"
    if outcome.status is Status.RANGE:
        lines = [f"the first bad commit is one of these {len(outcome.suspects)} (skipped commits hide which):"]
        for commit in outcome.suspects:
            step = outcome.step_of(commit)
            state = step.verdict.value if step else "untested"
            lines.append(f"  {commit} {state:<8} {outcome.subjects.get(commit, '')}")
        return "\n".join(lines) + "\n"
    first = outcome.suspects[0]
    step = outcome.step_of(first)
    lines = [f"first bad commit: {first} {outcome.subjects.get(first, '')}"]
    for f in step.findings if step else ():
        lines.append(f"  {finding_text(f)}")
        if f.evidence:
            lines.append(f"    evidence: {f.evidence}")
    return "\n".join(lines) + "\n"


def to_json(outcome: Outcome) -> str:
    document = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "good": outcome.good,
        "bad": outcome.bad,
        "status": outcome.status.value,
        "first_bad": outcome.first_bad,
        "suspects": list(outcome.suspects),
        "candidates": [{"commit": c, "subject": outcome.subjects.get(c, "")} for c in outcome.candidates],
        "steps": [{**asdict(s), "verdict": s.verdict.value} for s in outcome.steps],
    }
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


# --- the command -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    good: str
    bad: str
    pytest_args: tuple[str, ...]
    json_path: Path | None = None
    log_dir: Path | None = None
    timeout_s: float | None = None


def check_pytest_args(args: Sequence[str]) -> None:
    """ConfigError naming an option that each step sets itself (compare-ref, results file, update)."""
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in _OWN_OPTIONS:
            raise ConfigError(f"{arg!r} after --: each step sets {name} itself (compare-ref against GOOD)")


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
    probe = PytestProbe(repo, good, request.pytest_args, subjects, request.log_dir, request.timeout_s)
    count = 0

    def report(step: Step) -> None:
        nonlocal count
        count += 1
        out(step_line(count, step, bad) + "\n")

    outcome = search(commits, probe, good=good, on_step=report, subjects=subjects)
    out(render(outcome))
    if request.json_path is not None:
        write_atomic(request.json_path, to_json(outcome))
    return outcome
