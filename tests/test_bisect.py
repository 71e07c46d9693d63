"""``gpuperf bisect``: the search on its own, and end to end on a real git repository with a real perf suite."""

from __future__ import annotations

import dataclasses
import json
import signal
from collections.abc import Iterable
from pathlib import Path

import pytest
from git_repo import git, init
from test_report_helpers import make_session

from pytest_gpuperf import cli
from pytest_gpuperf.cli import bisect
from pytest_gpuperf.cli.bisect import BisectError, Status, Step, StepVerdict, search
from pytest_gpuperf.cli.bisect.render import measuring_line, step_line
from pytest_gpuperf.model import Kind, Verdict

# --- the search, with a probe that answers from a table ------------------------------------------


def commits(n: int) -> list[str]:
    return [f"{i:02d}" + "0" * 38 for i in range(n)]


class Table:
    """A probe that says ``bad`` from index ``first_bad`` on, and ``skip`` for the indices in ``skipped``."""

    def __init__(self, candidates: list[str], first_bad: int | None, skipped: Iterable[int] = (),
                 inconclusive: Iterable[int] = (), inconclusive_once: Iterable[int] = ()) -> None:  # fmt: skip
        self.candidates = candidates
        self.first_bad = first_bad
        self.skipped = {candidates[i] for i in skipped}
        self.inconclusive = {candidates[i] for i in inconclusive}  # at every measurement
        self.inconclusive_once = {candidates[i] for i in inconclusive_once}  # at the first only
        self.asked: list[int] = []

    def __call__(self, commit: str) -> Step:
        index = self.candidates.index(commit)
        self.asked.append(index)
        if commit in self.skipped:
            return Step(commit, "", StepVerdict.SKIP, reason="cannot build")
        if commit in self.inconclusive or (commit in self.inconclusive_once and self.asked.count(index) == 1):
            return Step(commit, "", StepVerdict.INCONCLUSIVE, reason="not significant")
        bad = self.first_bad is not None and index >= self.first_bad
        return Step(commit, "", StepVerdict.BAD if bad else StepVerdict.GOOD)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 100, 1000])
def test_every_first_bad_commit_is_found_in_about_log2_steps(n: int) -> None:
    candidates = commits(n)
    for first_bad in range(n):
        probe = Table(candidates, first_bad)
        outcome = search(candidates, probe)
        assert outcome.status is Status.FOUND
        assert outcome.first_bad == candidates[first_bad]
        assert probe.asked[0] == n - 1  # BAD is measured first
        assert len(probe.asked) <= bisect.expected_steps(n)
        assert len(set(probe.asked)) == len(probe.asked)  # no commit measured twice


def test_bad_not_slower_ends_after_one_step() -> None:
    candidates = commits(6)
    probe = Table(candidates, None)
    outcome = search(candidates, probe)
    assert outcome.status is Status.BAD_NOT_SLOWER and outcome.first_bad is None
    assert probe.asked == [5]
    assert outcome.status.exit_code == bisect.EXIT_NOT_REPRODUCED
    assert "is not slower than GOOD" in bisect.render(outcome)


def test_bad_that_cannot_be_measured_is_not_reproduced() -> None:
    candidates = commits(4)
    outcome = search(candidates, Table(candidates, 0, skipped=[3]))
    assert outcome.status is Status.BAD_UNTESTABLE and outcome.status.exit_code == 1
    assert "could not be measured" in bisect.render(outcome) and "cannot build" in bisect.render(outcome)


def test_a_skipped_commit_away_from_the_answer_is_stepped_around() -> None:
    candidates = commits(8)
    probe = Table(candidates, 5, skipped=[3])
    outcome = search(candidates, probe)
    assert outcome.status is Status.FOUND and outcome.first_bad == candidates[5]
    assert 3 in probe.asked  # it was tried, and skipped
    assert [s.verdict for s in outcome.steps].count(StepVerdict.SKIP) == 1


def test_skipped_commits_next_to_the_answer_leave_a_range() -> None:
    candidates = commits(8)
    outcome = search(candidates, Table(candidates, 5, skipped=[3, 4]))
    assert outcome.status is Status.RANGE and outcome.status.exit_code == bisect.EXIT_RANGE
    assert outcome.suspects == tuple(candidates[3:6])  # the two skipped ones and the first bad one measured
    text = bisect.render(outcome)
    assert "one of these 3" in text and all(c in text for c in candidates[3:6])


def test_an_inconclusive_step_is_measured_again_and_then_decides() -> None:
    candidates = commits(8)
    probe = Table(candidates, 5, inconclusive_once=[4])
    outcome = search(candidates, probe)
    assert outcome.status is Status.FOUND and outcome.first_bad == candidates[5]
    assert probe.asked.count(4) == 2
    assert [s.verdict for s in outcome.steps].count(StepVerdict.INCONCLUSIVE) == 1


def test_a_commit_inconclusive_twice_is_never_called_good() -> None:
    """The review's history: the slow commit measured +287% but not significant must not make a later one first bad."""
    candidates = commits(4)  # a comment, a syntax error, the slowdown, a comment (BAD)
    probe = Table(candidates, 2, skipped=[1], inconclusive=[2])
    outcome = search(candidates, probe)
    assert outcome.status is Status.RANGE and outcome.first_bad is None
    assert outcome.status.exit_code == bisect.EXIT_RANGE
    assert candidates[2] in outcome.suspects and candidates[3] in outcome.suspects
    assert probe.asked.count(2) == 2
    text = bisect.render(outcome)
    assert "inconclusive" in text and "measured twice without a significant answer" in text
    bad_inconclusive = search(candidates, Table(candidates, 0, inconclusive=[3]))
    assert bad_inconclusive.status is Status.BAD_UNTESTABLE and bad_inconclusive.status.exit_code == 1


def test_a_change_beyond_the_threshold_that_is_not_significant_is_inconclusive() -> None:
    session = make_session()
    noisy = []
    for r in session.results:
        if r.verdict is Verdict.REGRESSION:
            continue
        noisy_time = {"verdict": Verdict.UNCHANGED, "change": 2.867, "ci_low": 0.57, "ci_high": 4.156,
                      "p_value": 0.22, "threshold": 0.1}  # fmt: skip
        comparisons = tuple(
            dataclasses.replace(c, **noisy_time) if c.kind is Kind.TIME else c  # type: ignore[arg-type]
            for c in r.comparisons
        )
        noisy.append(dataclasses.replace(r, comparisons=comparisons))
    step = bisect.judge_session("c" * 40, "K=4", dataclasses.replace(session, results=tuple(noisy)), 0)
    assert step.verdict is StepVerdict.INCONCLUSIVE
    assert step.findings and all(f.change == 2.867 for f in step.findings)
    line = step_line(1, step, "b" * 40)
    assert "inconclusive" in line and "not significant" in line and "+286.7%" in line


def test_judging_a_results_file_uses_the_gates_definition_of_failing() -> None:
    session = make_session()  # one regression among its measurements
    regressed = [r.measurement.key for r in session.results if r.verdict is Verdict.REGRESSION]
    assert regressed
    step = bisect.judge_session("c" * 40, "slow", session, 1)
    assert step.verdict is StepVerdict.BAD
    assert {f.key for f in step.findings} == set(regressed)
    assert all(f.verdict == "regression" for f in step.findings)


def test_a_run_that_failed_without_a_regression_is_skipped_not_good() -> None:
    session = make_session()
    settled = tuple(r for r in session.results if r.verdict not in (Verdict.REGRESSION, Verdict.NOT_RESOLVED))
    calm = type(session)(settled, session.environment, session.provenance, session.mode, session.started_at)
    assert bisect.judge_session("c" * 40, "", calm, 0).verdict is StepVerdict.GOOD
    # a change past the threshold whose interval reaches back below it (not resolved) calls the step neither way
    open_ = tuple(r for r in session.results if r.verdict is not Verdict.REGRESSION)
    unresolved = type(session)(open_, session.environment, session.provenance, session.mode, session.started_at)
    assert bisect.judge_session("c" * 40, "", unresolved, 0).verdict is StepVerdict.INCONCLUSIVE
    failed = bisect.judge_session("c" * 40, "", calm, 1)
    assert failed.verdict is StepVerdict.SKIP and "without a regression" in failed.reason
    empty = type(session)((), session.environment, session.provenance, session.mode, session.started_at)
    assert bisect.judge_session("c" * 40, "", empty, 0).verdict is StepVerdict.SKIP


def test_pythonpath_into_the_repository_follows_the_worktree(tmp_path: Path) -> None:
    repo, worktree = tmp_path / "repo", tmp_path / "wt"
    (repo / "src").mkdir(parents=True)
    env = {"PYTHONPATH": f"{repo}/src:/opt/elsewhere", "GPUPERF_HISTORY": "postgresql://u:pw@db/x", "HOME": "/h"}
    child = bisect.child_environment(env, repo.resolve(), worktree)
    assert child["PYTHONPATH"] == f"{worktree}/src:/opt/elsewhere"
    assert "GPUPERF_HISTORY" not in child and child["HOME"] == "/h"


# --- refs and ranges on a real repository ------------------------------------------------------------


def commit(root: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    init(root)
    for n in range(4):
        commit(root, {"f.txt": f"{n}\n"}, f"c{n}")
    git(root, "checkout", "-q", "-b", "side", "HEAD~2")
    commit(root, {"g.txt": "side\n"}, "side")
    git(root, "checkout", "-q", "main")
    return root


@pytest.mark.parametrize(
    ("good", "bad", "message"),
    [
        ("--all", "HEAD", "GOOD '--all' starts with '-': refused"),
        ("HEAD~3", "-n1", "BAD '-n1' starts with '-': refused"),
        ("no-such-branch", "HEAD", "GOOD 'no-such-branch' is no commit, branch or tag in"),
        ("HEAD~3", "HEAD~9", "BAD 'HEAD~9' is no commit"),
        ("HEAD", "HEAD~3", "is not an ancestor of BAD"),
        ("side", "main", "is not an ancestor of BAD"),
        ("HEAD", "main", "no commit between GOOD and BAD"),
    ],
)
def test_bad_refs_are_refused_before_anything_runs(small_repo: Path, good: str, bad: str, message: str) -> None:
    with pytest.raises(BisectError, match=message.replace("(", r"\(")):
        bisect.run(bisect.Request(good, bad, ()), lambda text: None, cwd=small_repo)
    assert git(small_repo, "worktree", "list").count("\n") == 0  # no worktree was made


def test_cli_exit_codes_for_bad_input(small_repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import io

    monkeypatch.chdir(small_repo)
    err = io.StringIO()
    assert cli.main(["bisect", "nope", "HEAD", "--", "-k", "x"], stdout=io.StringIO(), stderr=err) == 3
    assert "gpuperf bisect: GOOD 'nope' is no commit, branch or tag" in err.getvalue()
    assert cli.main(["bisect", "HEAD"], stdout=io.StringIO(), stderr=io.StringIO()) == 2
    assert cli.main(["bisect", "-x", "HEAD"], stdout=io.StringIO(), stderr=io.StringIO()) == 2
    assert cli.main(["bisect", "a", "b", "--step-timeout", "0"], stdout=io.StringIO(), stderr=io.StringIO()) == 2
    err = io.StringIO()
    assert cli.main(["bisect", "a", "b", "--", "--gpuperf-json=x.json"], stdout=io.StringIO(), stderr=err) == 2
    assert "'--gpuperf-json=x.json' after --: each step sets --gpuperf-json itself" in err.getvalue()
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    assert cli.main(["bisect", "HEAD~1", "HEAD"], stdout=io.StringIO(), stderr=err) == 3
    assert "is not inside a git repository" in err.getvalue()


def test_a_selection_your_checkout_cannot_collect_is_bad_input(
    small_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.chdir(small_repo)
    err = io.StringIO()
    assert cli.main(["bisect", "HEAD~3", "HEAD", "--", "-p", "no:cacheprovider"], stdout=io.StringIO(), stderr=err) == 3
    assert "PYTEST_ARGS select no test in" in err.getvalue()
    (small_repo / "test_broken.py").write_text("def test_x(:\n")
    err = io.StringIO()
    assert cli.main(["bisect", "HEAD~3", "HEAD", "--", "test_broken.py"], stdout=io.StringIO(), stderr=err) == 3
    assert "the selected tests could not be collected in" in err.getvalue() and "SyntaxError" in err.getvalue()
    assert git(small_repo, "worktree", "list").count("\n") == 0
    # --base-tests head needs your selection too
    assert cli.main(["bisect", "--base-tests", "head", "HEAD~3", "HEAD", "--", "-p", "no:cacheprovider"],
                    stdout=io.StringIO(), stderr=io.StringIO()) == 3  # fmt: skip


def test_cli_keeps_everything_after_the_first_double_dash_for_pytest() -> None:
    own, rest = cli._pytest_args(["bisect", "A", "B", "--json", "f.json", "--", "tests/", "-k", "a or b", "--", "x"])
    assert own == ["bisect", "A", "B", "--json", "f.json"]
    assert rest == ["tests/", "-k", "a or b", "--", "x"]
    assert cli._pytest_args(["compare", "a", "--", "b"]) == (["compare", "a", "--", "b"], [])


def test_candidates_are_the_first_parent_line_after_good(small_repo: Path) -> None:
    git(small_repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    repo = bisect.open_repository(small_repo)
    good = git(small_repo, "rev-parse", "HEAD~4")  # c0
    listed = bisect.candidates(repo, good, git(small_repo, "rev-parse", "HEAD"))
    assert [s for _, s in listed] == ["c1", "c2", "c3", "merge side"]  # not the side branch's commit


HOSTILE_SUBJECTS = ["\x1b[31mred\x1b[0m and \x1b]0;window title\x07", "clip \x1b]52;c;cHduZWQ=\x07board",
                    "bell\x07 \x9b2J c1 \u202eright to left"]  # fmt: skip


def test_commit_subjects_reach_the_terminal_without_their_control_characters(small_repo: Path) -> None:
    for n, subject in enumerate(HOSTILE_SUBJECTS):
        commit(small_repo, {"f.txt": f"hostile {n}\n"}, subject)
    repo = bisect.open_repository(small_repo)
    listed = bisect.candidates(repo, git(small_repo, "rev-parse", "HEAD~3"), git(small_repo, "rev-parse", "HEAD"))
    assert [s for _, s in listed] == HOSTILE_SUBJECTS  # git keeps them as written
    steps = [Step(c, s, StepVerdict.SKIP, reason=f"pytest said {s}") for c, s in listed]
    outcome = bisect.Outcome(listed[0][0], listed[-1][0], tuple(c for c, _ in listed), tuple(steps), Status.RANGE,
                             tuple(c for c, _ in listed), dict(listed))  # fmt: skip
    shown = [bisect.render(outcome), *(step_line(1, step, outcome.bad) for step in steps),
             *(measuring_line(1, c, s) for c, s in listed)]  # fmt: skip
    for text in shown:
        assert not any(ch in text for ch in "\x1b\x07\x9b\u202e"), repr(text)
    assert "red and" in shown[0] and "clip board" in shown[2]
    assert json.loads(bisect.to_json(outcome))["candidates"][0]["subject"] == HOSTILE_SUBJECTS[0]  # JSON: as is


# --- end to end: a perf suite over nine commits, a 3x slowdown planted in one --------------------

SPIN = """
WORK = {work}

def spin():
    total = 0
    for i in range(WORK):
        total += i * i
    return total

def test_spin(gpu_bench):
    gpu_bench(spin)
"""
BROKEN = "def test_spin(gpu_bench:\n"  # a syntax error: collection fails, the commit cannot be measured

# Tiny budgets; a threshold far under the planted +200% and far over the noise of unchanged code.
PYTEST_ARGS = (
    "-p", "no:cacheprovider", "--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.5",
    "--gpuperf-threshold=0.5", "--gpuperf-confirm-pairs=3",
)  # fmt: skip


def perf_history(root: Path) -> list[str]:
    """GOOD, then eight commits: a broken one at index 3 (fixed at 4), the 3x slowdown at index 5."""
    init(root)
    made = [commit(root, {"test_perf.py": SPIN.format(work=20_000), "conftest.py": ""}, "the perf suite")]
    plan = [
        ({"README": "docs\n"}, "docs"),
        ({"README": "more docs\n"}, "more docs"),
        ({"notes.txt": "n\n"}, "notes"),
        ({"test_perf.py": BROKEN}, "half-finished refactor"),
        ({"test_perf.py": SPIN.format(work=20_000)}, "finish the refactor"),
        ({"test_perf.py": SPIN.format(work=60_000)}, "make the loop three times longer"),
        ({"README": "even more docs\n"}, "docs again"),
        ({"notes.txt": "m\n"}, "notes again"),
    ]
    made += [commit(root, files, message) for files, message in plan]
    return made


def run_cli(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    import io

    monkeypatch.chdir(root)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["bisect", *args, "--", *PYTEST_ARGS], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_bisect_names_the_planted_commit_stepping_around_a_broken_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = perf_history(tmp_path / "repo")
    good, broken, planted, bad = made[0], made[4], made[6], made[-1]
    report = tmp_path / "bisect.json"
    code, out, err = run_cli(tmp_path / "repo", monkeypatch, "main~8", "main", "--json", str(report))
    assert code == 0, out + err
    assert f"first bad commit: {planted} make the loop three times longer" in out
    assert "test_perf.py::test_spin::default time.p50:" in out and "evidence: " in out
    document = json.loads(report.read_text())
    assert document["status"] == "found" and document["first_bad"] == planted
    assert document["good"] == good and document["bad"] == bad
    verdicts = {s["commit"]: s["verdict"] for s in document["steps"]}
    assert document["steps"][0]["commit"] == bad and verdicts[bad] == "bad"
    assert verdicts[broken] == "skip"  # the middle commit first: it cannot be collected
    assert "pytest exited 2" in next(s["reason"] for s in document["steps"] if s["commit"] == broken)
    assert verdicts[planted] == "bad" and verdicts[made[5]] == "good"  # the commit before the plant
    assert len(document["steps"]) == 5  # BAD, the broken middle, then three halvings
    evidence = next(s for s in document["steps"] if s["commit"] == planted)["findings"][0]
    assert evidence["metric"] == "time.p50" and evidence["change"] > 0.5 and evidence["ci_low"] > 1.0
    assert git(tmp_path / "repo", "worktree", "list").count("\n") == 0  # every worktree removed


@pytest.mark.slow
def test_bisect_says_when_bad_is_not_slower(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = perf_history(tmp_path / "repo")
    code, out, err = run_cli(tmp_path / "repo", monkeypatch, made[0], made[3])  # before the plant
    assert code == 1, out + err
    assert f"BAD {made[3][:12]} is not slower than GOOD {made[0][:12]}" in out
    assert out.count("step 1: ") == 2 and "step 2: " not in out  # "measuring ...", then its verdict


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "said"), [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_an_interrupted_bisect_cleans_up_and_says_so_in_one_line(tmp_path: Path, sig: int, said: str) -> None:
    import subprocess
    import sys
    import time

    root = tmp_path / "repo"
    perf_history(root)
    command = [sys.executable, "-m", "pytest_gpuperf", "bisect", "main~8", "main", "--", *PYTEST_ARGS]
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    while "step 1: measuring" not in (line := process.stdout.readline()):
        assert line, "the bisect ended before its first step"
    time.sleep(1.0)  # the step's worktree and pytest are running
    process.send_signal(sig)
    out, err = process.communicate(timeout=120)
    assert process.returncode == cli.EXIT_INTERRUPTED, out + err
    assert err == f"gpuperf bisect: interrupted ({said})\n"  # one line, no traceback
    assert git(root, "worktree", "list").count("\n") == 0  # the step's worktree removed


# --- a perf test newer than GOOD: added at BAD, after the slowdown it measures ---------------------------

PKG = """
WORK = {work}


def spin():
    total = 0
    for i in range(WORK):
        total += i * i
    return total
"""
NEW_PERF_TEST = "from pkg import spin\n\n\ndef test_spin(gpu_bench):\n    gpu_bench(spin)\n"


def history_with_a_newer_test(root: Path) -> list[str]:
    """GOOD (pkg, no perf test), docs, the 3x slowdown, more docs, then the perf test (BAD)."""
    init(root)
    made = [commit(root, {"pkg.py": PKG.format(work=20_000), "conftest.py": ""}, "the package")]
    plan = [
        ({"README": "docs\n"}, "docs"),
        ({"pkg.py": PKG.format(work=60_000)}, "make the loop three times longer"),
        ({"README": "more docs\n"}, "more docs"),
        ({"test_perf.py": NEW_PERF_TEST}, "add a perf test"),
    ]
    return made + [commit(root, files, message) for files, message in plan]


@pytest.mark.slow
def test_a_perf_test_newer_than_every_candidate_still_bisects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = history_with_a_newer_test(tmp_path / "repo")
    report = tmp_path / "bisect.json"
    code, out, err = run_cli(tmp_path / "repo", monkeypatch, made[0], made[-1], "--json", str(report))
    assert code == 0, out + err
    assert "your 1 selected test(s) run where a commit or GOOD lacks them (--base-tests=auto)" in out
    assert f"first bad commit: {made[2]} make the loop three times longer" in out
    verdicts = {s["commit"]: s["verdict"] for s in json.loads(report.read_text())["steps"]}
    assert verdicts[made[2]] == "bad" and verdicts[made[1]] == "good"
    assert git(tmp_path / "repo", "worktree", "list").count("\n") == 0
    # each commit's own tests: the test is new at BAD (nothing slower to find), and absent before it
    code, out, _ = run_cli(tmp_path / "repo", monkeypatch, made[0], made[-1], "--base-tests", "base")
    assert code == 1 and "is not slower than GOOD" in out
