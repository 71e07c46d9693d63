"""The Action's history flow: the flow's choice, the recording command, and the regression alerts
(action/alerts.py) against recorded GitHub API payloads served on 127.0.0.1 (tests/data/action/)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_action import ACTION, DATA, REPO, TOKEN, FakeGitHub, read_outputs

if str(ACTION) not in sys.path:  # the scripts import each other as top-level modules, as they run
    sys.path.append(str(ACTION))

import alert_text
import alerts
import prepare
import run_gate
import workflow

CHANGES = DATA / "history_changes.json"
ISSUES = f"/repos/{REPO}/issues?state=all&per_page=100&labels=performance-regression"
PAGE_2 = "/repositories/812345678/issues?state=all&per_page=100&labels=performance-regression&page=2"
RUN = "https://github.com/gpuperf-org/pytest-gpuperf/actions/runs/13572468"
ARTIFACT = RUN + "/artifacts/2718281828"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    yield fake
    fake.close()


def recorded_changes() -> list[alert_text.Change]:
    return alert_text.parse_changes(CHANGES.read_text(encoding="utf-8"), str(CHANGES))


def results_with_changes(tmp_path: Path, text: str | None = None) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / alerts.FILE).write_text(CHANGES.read_text() if text is None else text, encoding="utf-8")
    return folder


def serve_issues(github: FakeGitHub) -> None:
    github.reply("POST", "/graphql", "graphql_viewer.json")
    github.reply("GET", ISSUES, "alert_issues_page1.json")
    github.reply("GET", PAGE_2, "alert_issues_page2.json")


def post_env(github: FakeGitHub, tmp_path: Path, results: Path, **extra: str) -> dict[str, str]:
    return github.env(tmp_path, RESULTS_DIR=str(results), ARTIFACT_URL=ARTIFACT, RECENT="3",
                      LABEL="performance-regression", **extra)  # fmt: skip


# --- the change points as data ---------------------------------------------------------------------


def test_the_recorded_change_points_parse_and_the_new_regressions_are_chosen() -> None:
    changes = recorded_changes()
    assert len(changes) == 5
    fresh = alert_text.new_regressions(changes, recent=3)
    # the improvement and the regression 12 runs old are not alerted on
    assert [c.test.rsplit("::", 1)[-1][:14] for c in fresh] == ["test_matmul[fp", "test_attention", "test_conv2d"]
    assert alert_text.new_regressions(changes, recent=1) == [changes[0], changes[2]]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c.update(first_bad="HEAD"), r"\[0\]\.first_bad: expected a full commit hash, got \"HEAD\""),
        (lambda c: c.update(last_good="abc123"), r"\[0\]\.last_good: expected a full commit hash"),
        (lambda c: c.update(change="12%"), r"\[0\]\.change: expected a finite number or null, got \"12%\""),
        (lambda c: c.update(kind="worse"), r"\[0\]\.kind: expected regression or improvement"),
        (lambda c: c.update(runs_after=True), r"\[0\]\.runs_after: expected a whole number >= 0"),
        (lambda c: c.pop("test"), r"\[0\]: the field 'test' is missing"),
        (lambda c: c.update(gradual="yes"), r"\[0\]\.gradual: expected true or false"),
        (lambda c: c.update(pending="no"), r"\[0\]\.pending: expected true or false"),
    ],
)
def test_a_malformed_change_point_is_named_by_entry_and_field(edit: Any, message: str) -> None:
    document = json.loads(CHANGES.read_text())
    edit(document[0])
    with pytest.raises(workflow.ActionError, match=r"changes\.json: " + message):
        alert_text.parse_changes(json.dumps(document), "changes.json")
    with pytest.raises(workflow.ActionError, match="expected a JSON list"):
        alert_text.parse_changes('{"test": "x"}', "changes.json")


def test_marker_is_keyed_by_series_and_first_bad_commit() -> None:
    a, b, c, d, _ = recorded_changes()
    marker = alert_text.marker
    assert marker(a) == marker(a) and marker(a).endswith(f"first-bad={a.first_bad} -->")
    assert len({marker(x) for x in (a, b, c, d)}) == 4
    assert marker(c).split(" first-bad")[0] != marker(d).split(" first-bad")[0]  # device classes differ
    assert all(m.count("-->") == 1 for m in map(marker, (a, b, c, d)))


def test_issue_body_names_the_range_the_change_and_the_profile_diff() -> None:
    change = recorded_changes()[0]
    links = alert_text.Links("https://github.com", REPO, RUN, ARTIFACT, "https://perf.example.org/dashboard/")
    text = alert_text.issue_body(change, links, 3)
    lines = text.splitlines()
    assert lines[0] == alert_text.marker(change)
    assert "**+23.4%** (95% interval +20.1% to +26.0%, p = 1.2e-05): 1.23 ms → 1.518 ms, a step at" in text
    compare = f"https://github.com/{REPO}/compare/{change.last_good}...{change.first_bad}"
    assert f"[`{change.last_good[:12]}...{change.first_bad[:12]}`]({compare})" in text
    assert "[the history dashboard](https://perf.example.org/dashboard/)" in text and f"]({ARTIFACT})" in text
    assert f"[this workflow run]({RUN})" in text
    assert "device class `cuda-nvidia-h100-80gb-hbm3`, branch `main`" in text


def test_a_change_point_without_finite_numbers_is_said_as_unknown() -> None:
    document = json.loads(CHANGES.read_text())[:1]
    document[0].update(change=None, ci_low=None, ci_high=None, before=None, p_value=None)
    (change,) = alert_text.parse_changes(json.dumps(document), "changes.json")
    text = alert_text.issue_body(change, alert_text.Links("https://github.com", REPO, RUN), 3)
    assert "**unknown** (95% interval unknown to unknown): unknown → 1.518 ms" in text
    assert alert_text.title(change).startswith("Performance regression: tests/perf/test_matmul.py")


def test_text_from_the_change_points_is_inert_in_the_issue() -> None:
    cmarkgfm = pytest.importorskip("cmarkgfm")
    evil = recorded_changes()[1]  # a test id with a mention, a tag, a link, backticks, a pipe; a newline
    text = alert_text.issue_body(evil, alert_text.Links("https://github.com", REPO, RUN), 3)
    html = cmarkgfm.github_flavored_markdown_to_html(text, options=cmarkgfm.Options.CMARK_OPT_UNSAFE)
    assert "<img" not in html and 'evil.example"' not in html and 'href="https://evil' not in html
    assert "fused kernel" in text and "fused\nkernel" not in text
    assert "@octocat" in html and "<code>tests/perf/test_attn.py::test_attention['x' @octocat" in html
    assert "3 GiB → 3.243 GiB" in text and "gradual creep" in text
    assert len(alert_text.title(evil)) <= alert_text.TITLE_MAX and "\n" not in alert_text.title(evil)


# --- posting against the recorded GitHub -----------------------------------------------------------


def test_alerts_create_update_and_leave_a_closed_one_across_two_pages(github: FakeGitHub, tmp_path: Path) -> None:
    serve_issues(github)
    github.reply("POST", f"/repos/{REPO}/issues", "alert_issue_created.json")
    github.reply("PATCH", f"/repos/{REPO}/issues/31", "alert_issue_updated.json")
    results = results_with_changes(tmp_path)
    env = post_env(github, tmp_path, results)
    assert alerts.main(["post"], env) == 0
    matmul, attention, conv = recorded_changes()[:3]
    sent = github.requests()
    assert [(m, p) for m, p, _ in sent] == [
        ("POST", "/graphql"),
        ("GET", ISSUES),
        ("GET", PAGE_2),
        ("PATCH", f"/repos/{REPO}/issues/31"),  # the bot's own alert for matmul, on page two
        ("POST", f"/repos/{REPO}/issues"),  # attention: new (the PR and the pasted marker do not count)
    ]  # conv2d's alert was closed: left closed, not duplicated
    update, create = sent[3][2], sent[4][2]
    links = alert_text.Links("https://github.com", REPO, RUN, ARTIFACT)
    assert update["body"] == alert_text.issue_body(matmul, links, 3)
    assert update["title"] == alert_text.title(matmul)
    assert create["body"].splitlines()[0] == alert_text.marker(attention)
    assert create["labels"] == ["performance-regression"]
    summary_text = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert "3 new regression(s) in the newest 3 runs" in summary_text
    assert "issue #31 updated" in summary_text and "issue #42 created" in summary_text
    assert "issue #30 closed" in summary_text
    assert conv.first_bad[:12] in summary_text
    assert all(s.authorization == f"Bearer {TOKEN}" for s in github.seen)


def test_a_rerun_with_the_alert_up_to_date_edits_nothing(github: FakeGitHub, tmp_path: Path) -> None:
    matmul = recorded_changes()[0]
    links = alert_text.Links("https://github.com", REPO, RUN, ARTIFACT)
    page = github.recorded("alert_issues_page2.json")
    page["body"][0]["body"] = alert_text.issue_body(matmul, links, 3)
    github.reply("POST", "/graphql", "graphql_viewer.json")
    github.reply("GET", ISSUES, page)
    posted, refused = alerts.post(github.client(), REPO, [matmul], links, 3, "performance-regression")
    assert refused is None and [(p.action, p.number) for p in posted] == [("unchanged", 31)]
    assert [m for m, _, _ in github.requests()] == ["POST", "GET"]


def test_no_label_lists_every_issue() -> None:
    assert alerts.list_path(REPO, "") == f"/repos/{REPO}/issues?state=all&per_page=100"
    assert (
        alerts.list_path(REPO, "perf regression")
        == f"/repos/{REPO}/issues?state=all&per_page=100&labels=perf%20regression"
    )


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("alert_rate_limited.json", "GitHub's API rate limit stops the regression alerts until 2026-11-18 11:06 UTC"),
        ("alert_secondary_rate_limit.json", "GitHub's API rate limit stops the regression alerts for 60 s"),
        ("alert_forbidden.json", "the token may not write issues (HTTP 403: Resource not accessible by integration)"),
    ],
)
def test_a_refusal_is_a_clear_error_note_not_a_failed_job(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str], reply: str, expected: str
) -> None:
    serve_issues(github)
    github.reply("POST", f"/repos/{REPO}/issues", reply)
    github.reply("PATCH", f"/repos/{REPO}/issues/31", "alert_issue_updated.json")
    env = post_env(github, tmp_path, results_with_changes(tmp_path))
    assert alerts.main(["post"], env) == 0
    out = capsys.readouterr().out
    assert "alert updated: #31" in out  # the update before the refusal stands
    error = next(line for line in out.splitlines() if line.startswith("::error"))
    assert expected in error.replace("%2C", ",")
    summary_text = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert expected in summary_text and "[!WARNING]" in summary_text
    if "rate" in reply:
        assert "2 alert(s) were not opened or updated" in summary_text and "next run opens them" in summary_text
    else:
        assert "permissions: issues: write" in summary_text


def test_a_rate_limit_while_listing_issues_posts_nothing(github: FakeGitHub, tmp_path: Path) -> None:
    github.reply("POST", "/graphql", "graphql_viewer.json")
    github.reply("GET", ISSUES, "alert_rate_limited.json")
    posted, refused = alerts.post(github.client(), REPO, recorded_changes()[:3], alert_text.Links("https://github.com",
                                  REPO, RUN), 3, "performance-regression")  # fmt: skip
    assert posted == [] and refused is not None and alerts.is_rate_limit(refused)
    assert "3 alert(s) were not opened" in alerts.refusal_message(refused, 3)


def test_no_new_regression_no_api_call(github: FakeGitHub, tmp_path: Path) -> None:
    document = [c for c in json.loads(CHANGES.read_text()) if c["kind"] == "improvement" or c["runs_after"] > 3]
    env = post_env(github, tmp_path, results_with_changes(tmp_path, json.dumps(document)))
    assert alerts.main(["post"], env) == 0
    assert github.requests() == []
    assert "0 new regression(s)" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()


def test_a_malformed_changes_file_is_an_error_naming_it(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = results_with_changes(tmp_path, "[{}]")
    assert alerts.main(["post"], post_env(github, tmp_path, results)) == 0
    out = capsys.readouterr().out
    assert out.startswith("::error") and f"{results / alerts.FILE}: [0]: the field" in out
    assert github.requests() == []


# --- finding the change points: the real CLI, its store from the environment -----------------------


def test_find_runs_gpuperf_history_changes_with_the_store_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    store = f"sqlite:///{tmp_path / 'history.db'}"
    # a stand-in gpuperf that records its command line and environment, and answers as changes does
    fake = tmp_path / "gpuperf"
    fake.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "out = sys.argv[sys.argv.index('--output') + 1]\n"
        "open(out, 'w').write('[]')\n"
        "seen = {'argv': sys.argv[1:], 'store': os.environ.get('GPUPERF_HISTORY')}\n"
        f"json.dump(seen, open({str(tmp_path / 'seen.json')!r}, 'w'))\n"
        "sys.exit(1)\n"
    )  # fmt: skip
    fake.chmod(0o755)
    env = {"RESULTS_DIR": str(results), "GPUPERF": str(fake), "GPUPERF_HISTORY": store, "RECENT": "2"}
    assert alerts.main(["find"], env) == 0
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["argv"] == ["history", "changes", "--format", "json", "--recent", "2", "--output",
                            str(results / alerts.FILE)]  # fmt: skip
    assert seen["store"] == store and store not in capsys.readouterr().out
    assert (results / alerts.FILE).read_text() == "[]"


def test_find_without_a_store_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"RESULTS_DIR": str(tmp_path), "GPUPERF": "gpuperf", "RECENT": "3"}
    assert alerts.main(["find"], env) == 0
    assert "GPUPERF_HISTORY is not set" in capsys.readouterr().out


# --- the flow: gate or history ---------------------------------------------------------------------

REPOSITORY = {"repository": {"full_name": REPO, "default_branch": "main"}}


@pytest.mark.parametrize(
    ("event", "ref", "history", "base", "expected"),
    [
        ("pull_request", "refs/pull/7/merge", True, "", "gate"),
        ("push", "refs/heads/main", True, "", "history"),
        ("push", "refs/heads/main", False, "main~1", "gate"),
        ("push", "refs/heads/feature", True, "main", "gate"),
        ("schedule", "refs/heads/main", True, "", "history"),
        ("schedule", "refs/heads/main", False, "main", "gate"),
        ("workflow_dispatch", "refs/heads/main", True, "", "history"),
        ("workflow_dispatch", "refs/heads/main", True, "v1", "gate"),
        ("merge_group", "refs/heads/gh-readonly-queue/main/pr-7", True, "", "gate"),
    ],
)
def test_flow_records_pushes_to_the_default_branch_and_nightly_runs(
    event: str, ref: str, history: bool, base: str, expected: str
) -> None:
    assert prepare.flow(event, REPOSITORY, ref, history, base) == expected


def test_prepare_in_the_history_flow_fetches_nothing_and_needs_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({**REPOSITORY, "ref": "refs/heads/main"}))
    outputs = tmp_path / "outputs"
    outputs.touch()
    env = {"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(event), "GITHUB_REF": "refs/heads/main",
           "GITHUB_JOB": "nightly", "RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(outputs),
           "GITHUB_WORKSPACE": str(tmp_path / "not-a-checkout"), "INPUT_HISTORY": "true"}  # fmt: skip
    assert prepare.main(env) == 1
    assert "needs the store's URL in the environment variable GPUPERF_HISTORY" in capsys.readouterr().out
    assert prepare.main({**env, "GPUPERF_HISTORY": "postgresql://perf:s3cret@db.internal/perf"}) == 0
    values = read_outputs(outputs)
    assert values["flow"] == "history" and values["base-ref"] == ""
    assert "s3cret" not in capsys.readouterr().out


def test_history_flow_runs_the_suite_in_baseline_mode_without_the_url(tmp_path: Path) -> None:
    command = run_gate.pytest_command("python", "tests/perf", "", tmp_path, False, "-k mm", history=True)
    assert command[:5] == ["python", "-m", "pytest", "tests/perf", "--gpuperf"]
    assert not any(a.startswith(("--gpuperf-compare-ref", "--gpuperf-history")) for a in command)
    assert command[-2:] == ["-k", "mm"]


@pytest.mark.slow
def test_history_flow_records_the_suite_in_the_store(tmp_path: Path) -> None:
    """The gate step in the history flow, on a real pytest-gpuperf run: the store gets the session."""
    history = pytest.importorskip("pytest_gpuperf.history.store")  # the store lands with the history package
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_perf.py").write_text("def test_spin(gpu_bench):\n    gpu_bench(lambda: sum(range(2000)))\n")
    subprocess.run(["git", "init", "-q"], cwd=suite, check=True)
    results = tmp_path / "results"
    prepare.record.write(results, prepare.record.GateRecord("nightly", None, None, ""))
    outputs = tmp_path / "outputs"
    outputs.touch()
    store = f"sqlite:///{tmp_path / 'history.db'}"
    env = {"RESULTS_DIR": str(results), "PYTHON": sys.executable, "SUITE": "test_perf.py", "FLOW": "history",
           "PYTEST_ARGS": "-p no:cacheprovider --gpuperf-min-time=0.05 --gpuperf-max-time=0.2",
           "GITHUB_OUTPUT": str(outputs), "GPUPERF_HISTORY": store, "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # fmt: skip
    assert run_gate.main(env, cwd=suite) == 0
    assert read_outputs(outputs)["exit-code"] == "0"
    with history.open_store(store) as opened:
        assert opened.count_runs() == 1


def test_the_json_of_gpuperf_history_changes_is_what_the_alerts_read() -> None:
    """The contract with history/render.py: its JSON, non-finite numbers included, parses field by field."""
    render = pytest.importorskip("pytest_gpuperf.history.render")
    from pytest_gpuperf.history.model import ChangeKind, ChangePoint, SeriesKey

    key = SeriesKey("tests/perf/test_mm.py::test_mm", "default", "time.p50", "cuda-nvidia-h100", "main")
    step = ChangePoint(key, "a" * 40, "b" * 40, 7, 1.0e6, 1.2e6, 0.2, 0.15, 0.25, 0.001, ChangeKind.REGRESSION, 2,
                       unit="ns")  # fmt: skip
    unbounded = ChangePoint(key, "c" * 40, "d" * 40, 9, 0.0, 5.0, math.inf, 0.1, math.inf, 0.01,
                            ChangeKind.REGRESSION, 1, gradual=True, unit="ns")  # fmt: skip
    parsed = alert_text.parse_changes(render.render_changes([step, unbounded], "json"), "changes.json")
    assert [(c.first_bad, c.change, c.ci_high, c.unit, c.gradual) for c in parsed] == [
        ("b" * 40, 0.2, 0.25, "ns", False),
        ("d" * 40, None, None, "ns", True),
    ]
