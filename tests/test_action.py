"""The GitHub Action's scripts (action/), run against recorded GitHub API payloads.

The payloads under tests/data/action/ are served by a small HTTP server on 127.0.0.1, so
the scripts' own HTTP client runs; each test checks the requests it made. The git steps
run on real repositories in tmp folders, the gate on a real pytest-gpuperf run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_report_helpers import make_session

from pytest_gpuperf.report.markdown import MARKER, render_comment
from pytest_gpuperf.report.results_json import write_results

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action"
DATA = Path(__file__).parent / "data" / "action"
sys.path.append(str(ACTION))  # the scripts import each other as top-level modules, as they run

import body  # noqa: E402
import comment  # noqa: E402
import forks  # noqa: E402
import github_api  # noqa: E402
import prepare  # noqa: E402
import record  # noqa: E402
import run_gate  # noqa: E402
import summary  # noqa: E402
import workflow  # noqa: E402

REPO = "gpuperf-org/pytest-gpuperf"
TOKEN = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
HEAD_SHA = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
COMMENTS = f"/repos/{REPO}/issues/7/comments?per_page=100"
PAGE_2 = "/repositories/812345678/issues/7/comments?per_page=100&page=2"
VIEWER = {"query": "query { viewer { login } }"}
H100, A100 = "gate (gpu=h100)", "gate (gpu=a100)"
ARTIFACT = "https://github.com/gpuperf-org/pytest-gpuperf/actions/runs/13572468/artifacts/2718281828"


# --- a recorded GitHub, served on 127.0.0.1 ----------------------------------------------------


@dataclasses.dataclass
class Seen:
    method: str
    path: str
    body: Any
    authorization: str | None


class FakeGitHub:
    """Answers each (method, path) with a recorded reply and keeps every request it was sent."""

    def __init__(self) -> None:
        self.replies: dict[tuple[str, str], dict[str, Any]] = {}
        self.seen: list[Seen] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def recorded(self, name: str) -> dict[str, Any]:
        """A recorded reply, its links pointing at this server."""
        reply: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8").replace("{api}", self.url))
        return reply

    def reply(self, method: str, path: str, name_or_reply: str | dict[str, Any]) -> None:
        reply = self.recorded(name_or_reply) if isinstance(name_or_reply, str) else name_or_reply
        self.replies[(method, path)] = reply

    def client(self) -> github_api.GitHub:
        return github_api.GitHub(TOKEN, self.url, self.url + "/graphql")

    def env(self, tmp_path: Path, **extra: str) -> dict[str, str]:
        outputs = tmp_path / "github_output"
        summary_file = tmp_path / "step_summary"
        outputs.touch()
        summary_file.touch()
        return {
            "GITHUB_API_URL": self.url,
            "GITHUB_GRAPHQL_URL": self.url + "/graphql",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_RUN_ID": "13572468",
            "GITHUB_OUTPUT": str(outputs),
            "GITHUB_STEP_SUMMARY": str(summary_file),
            "GITHUB_TOKEN": TOKEN,
            "PATH": os.environ.get("PATH", ""),
            **extra,
        }

    def requests(self) -> list[tuple[str, str, Any]]:
        return [(s.method, s.path, s.body) for s in self.seen]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                sent = json.loads(raw) if raw else None
                fake.seen.append(Seen(self.command, self.path, sent, self.headers.get("Authorization")))
                reply = fake.replies.get((self.command, self.path)) or {"status": 404, "body": {"message": "Not Found"}}
                data = json.dumps(reply["body"]).encode("utf-8")
                self.send_response(reply["status"])
                for name, value in reply.get("headers", {}).items():
                    if name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    yield fake
    fake.close()


def serve_comments(github: FakeGitHub) -> None:
    github.reply("POST", "/graphql", "graphql_viewer.json")
    github.reply("GET", COMMENTS, "comments_page1.json")
    github.reply("GET", PAGE_2, "comments_page2.json")


def results_dir(tmp_path: Path, key: str, exit_code: int | None, report: str | None) -> Path:
    folder = tmp_path / "results"
    record.write(folder, record.GateRecord(key=key, pull_request=7, exit_code=exit_code, compare_ref="origin/main"))
    if report is not None:
        (folder / record.REPORT).write_text(report, encoding="utf-8")
    return folder


def real_report() -> str:
    return render_comment(make_session())


# --- the text: marker, heading, outcome, truncation --------------------------------------------


def test_marker_encodes_the_key_so_keys_never_share_one() -> None:
    assert body.marker(H100) == "<!-- pytest-gpuperf-comment key=gate%20%28gpu%3Dh100%29 -->"
    keys = ["gate (gpu=a/b)", "gate (gpu=a-b)", "gate", "gate2", "x --> y", "gate (gpu=h100)", "gate (gpu=h100) "]
    markers = [body.marker(k) for k in keys]
    assert len(set(markers)) == len(keys)
    assert all(m.count("-->") == 1 and m.endswith(" -->") for m in markers)


def test_comment_body_wraps_the_real_report() -> None:
    report = real_report()
    text = body.comment_body(body.Outcome(H100, 1, report, ARTIFACT))
    lines = text.splitlines()
    assert lines[0] == body.marker(H100)
    assert lines[1] == "## pytest-gpuperf · `gate (gpu=h100)`"
    assert lines[3] == (
        f"Gate **failed** (pytest exit code 1: a regression or a failing test) · "
        f"[results, HTML report and traces]({ARTIFACT})"
    )
    assert MARKER not in lines  # the report's own marker would make a second, key-less match
    assert text.count("## pytest-gpuperf") == 1
    assert "| `test_matmul.py::test_matmul[fp16-4096]` | default | time.p50 | 1.000 ms | 1.250 ms |" in text
    assert text.count("<details>") == text.count("</details>") == 4
    assert "Truncated" not in text


def test_nothing_measured_still_says_so() -> None:
    collected_none = body.comment_body(body.Outcome(H100, 5, None, ARTIFACT))
    assert collected_none.splitlines()[0] == body.marker(H100)
    assert "Gate **failed** (pytest exit code 5: no tests were collected)" in collected_none
    assert collected_none.rstrip().endswith("No perf test measured in this run.")
    never_ran = body.comment_body(body.Outcome(H100, None, None, ARTIFACT))
    assert "The perf gate **did not run**" in never_ran
    assert "No perf test measured in this run." in never_ran


def test_comment_at_the_limit_is_whole_and_one_more_character_is_truncated() -> None:
    outcome = body.Outcome(H100, 0, real_report(), ARTIFACT)
    base_length = body.utf16_units(body.comment_body(outcome))
    pad = "x" * (body.COMMENT_LIMIT - base_length)
    exact = body.comment_body(dataclasses.replace(outcome, report=real_report() + pad))
    assert body.utf16_units(exact) == body.COMMENT_LIMIT
    assert exact.endswith(pad + "\n") or exact.endswith(pad)
    assert "Truncated" not in exact

    over = body.comment_body(dataclasses.replace(outcome, report=real_report() + pad + "y"))
    assert body.utf16_units(over) <= body.COMMENT_LIMIT
    assert over.startswith(body.marker(H100) + "\n## pytest-gpuperf · `gate (gpu=h100)`\n\nGate **passed**")
    assert over.rstrip().endswith(
        "**Truncated** to GitHub's limit of 65,536 characters: "
        f"the full report is in the [results artifact]({ARTIFACT})."
    )
    assert pad not in over  # the over-long last line went, whole


def test_a_long_real_report_is_cut_at_a_line_with_its_details_closed() -> None:
    session = make_session()
    many = dataclasses.replace(session, results=session.results * 400)
    report = render_comment(many)
    assert body.utf16_units(report) > body.COMMENT_LIMIT
    text = body.comment_body(body.Outcome(A100, 1, report, ARTIFACT))
    assert body.utf16_units(text) <= body.COMMENT_LIMIT
    assert text.splitlines()[0] == body.marker(A100)
    assert "🔴 **400 regressions" in text  # the report's summary line is kept
    assert text.count("<details>") == text.count("</details>")
    kept = text.split("\n\n---\n**Truncated**")[0].splitlines()
    assert all(line in report.splitlines() or line in text.splitlines()[:5] or line in ("", "</details>")
               for line in kept)  # fmt: skip


def test_limit_counts_utf16_units_not_characters() -> None:
    # 🔴 is one character and two UTF-16 units: 30,000 lines of it are 60,000 characters,
    # within the limit, and 90,000 units, over it: the body is cut, so it is within the
    # limit however GitHub counts.
    report = "## pytest-gpuperf\n\n" + "🔴\n" * 30_000
    assert len(report) < body.COMMENT_LIMIT < body.utf16_units(report)
    text = body.comment_body(body.Outcome(H100, 1, report, ARTIFACT))
    assert "Truncated" in text
    assert body.utf16_units(text) <= body.COMMENT_LIMIT


def test_a_single_line_over_the_limit_is_cut_within_it() -> None:
    text = body.comment_body(body.Outcome(H100, 1, "z" * 100_000, ARTIFACT), limit=2_000)
    assert body.utf16_units(text) == 2_000
    assert text.startswith(body.marker(H100))
    assert "results artifact" in text


def test_job_summary_text(tmp_path: Path) -> None:
    folder = results_dir(tmp_path, A100, 0, real_report())
    env = {"RESULTS_DIR": str(folder), "ARTIFACT_URL": ARTIFACT, "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    assert summary.main(env) == 0
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert text.startswith(
        "## pytest-gpuperf · `gate (gpu=a100)`\n\n"
        f"Gate **passed** (pytest exit code 0: all tests passed) · [results, HTML report and traces]({ARTIFACT})\n\n"
        "⚠️ **4 of 8 measurements could not be judged: 1 unstable, 1 not gated, 1 not resolved, 1 not comparable."
    )
    assert "\n\n🔴 **1 regression, 1 improvement" in text
    assert "pytest-gpuperf-comment" not in text
    assert "<summary>Environment</summary>" in text


def test_job_summary_when_pytest_never_ran_links_the_run(tmp_path: Path) -> None:
    folder = results_dir(tmp_path, "gate", None, None)
    env = {
        "RESULTS_DIR": str(folder),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_RUN_ID": "13572468",
    }
    assert summary.main(env) == 0
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "The perf gate **did not run**" in text
    assert f"(https://github.com/{REPO}/actions/runs/13572468)" in text
    assert "No perf test measured in this run." in text


def test_job_summary_is_capped_in_bytes() -> None:
    report = "## pytest-gpuperf\n\n" + "| ü | ü |\n" * 200_000
    text = body.summary_text(body.Outcome(H100, 0, report, ARTIFACT))
    assert body.utf8_bytes(text) <= body.SUMMARY_LIMIT
    assert "1,048,576 bytes" in text


# --- finding the sticky comment: marker and author, over pages ---------------------------------


def test_find_sticky_needs_the_marker_and_the_author() -> None:
    comments = [*json.loads((DATA / "comments_page1.json").read_text())["body"],
                *json.loads((DATA / "comments_page2.json").read_text())["body"]]  # fmt: skip
    bot = "github-actions[bot]"
    found = comment.find_sticky(comments, body.marker(H100), bot)
    assert found is not None and found["id"] == 2511000005  # not octocat's paste of the marker, not perf-bot's
    other = comment.find_sticky(comments, body.marker(H100), "perf-bot[bot]")
    assert other is not None and other["id"] == 2511000006
    a100 = comment.find_sticky(comments, body.marker(A100), bot)
    assert a100 is not None and a100["id"] == 2511000004
    assert comment.find_sticky(comments, body.marker("gate (gpu=l4)"), bot) is None
    # the comment of the workflow before the Action (the key-less marker) belongs to no key
    assert comment.find_sticky(comments, body.marker("gate"), bot) is None
    assert comment.find_sticky(comments, MARKER, bot)["id"] == 2511000003  # type: ignore[index]


def test_plan_create_update_or_leave() -> None:
    assert comment.plan(None, "x") == comment.Plan("create")
    assert comment.plan({"id": 5, "body": "old"}, "new") == comment.Plan("update", 5)
    assert comment.plan({"id": 5, "body": "same"}, "same") == comment.Plan("unchanged", 5)


def test_post_updates_its_own_comment_on_page_two(github: FakeGitHub) -> None:
    serve_comments(github)
    github.reply("PATCH", f"/repos/{REPO}/issues/comments/2511000005", "comment_updated.json")
    outcome = body.Outcome(H100, 0, real_report(), ARTIFACT)
    done = comment.post(github.client(), REPO, 7, outcome)
    assert done == comment.Posted("update", 2511000005, f"https://github.com/{REPO}/pull/7#issuecomment-2511000005")
    assert github.requests() == [
        ("POST", "/graphql", VIEWER),
        ("GET", COMMENTS, None),
        ("GET", PAGE_2, None),
        ("PATCH", f"/repos/{REPO}/issues/comments/2511000005", {"body": body.comment_body(outcome)}),
    ]
    assert {s.authorization for s in github.seen} == {f"Bearer {TOKEN}"}


def test_matrix_jobs_keep_their_own_comments(github: FakeGitHub) -> None:
    serve_comments(github)
    github.reply("PATCH", f"/repos/{REPO}/issues/comments/2511000004", "comment_updated.json")
    github.reply("PATCH", f"/repos/{REPO}/issues/comments/2511000005", "comment_updated.json")
    github.reply("POST", f"/repos/{REPO}/issues/7/comments", "comment_created.json")
    keys = {gpu: prepare.comment_key("", "gate", json.dumps({"gpu": gpu})) for gpu in ("a100", "h100", "l4")}
    assert keys == {"a100": A100, "h100": H100, "l4": "gate (gpu=l4)"}
    for key in keys.values():
        comment.post(github.client(), REPO, 7, body.Outcome(key, 0, real_report(), ARTIFACT))
    writes = [
        (m, p, b["body"].split("\n", 1)[0]) for m, p, b in github.requests() if m in ("PATCH", "POST") and b != VIEWER
    ]
    assert writes == [
        ("PATCH", f"/repos/{REPO}/issues/comments/2511000004", body.marker(A100)),
        ("PATCH", f"/repos/{REPO}/issues/comments/2511000005", body.marker(H100)),
        ("POST", f"/repos/{REPO}/issues/7/comments", body.marker("gate (gpu=l4)")),
    ]


def test_an_unchanged_comment_is_not_edited(github: FakeGitHub) -> None:
    outcome = body.Outcome(A100, 0, real_report(), ARTIFACT)
    serve_comments(github)
    page2 = github.recorded("comments_page2.json")
    page2["body"][0]["body"] = body.comment_body(outcome)
    github.reply("GET", PAGE_2, page2)
    done = comment.post(github.client(), REPO, 7, outcome)
    assert done.action == "unchanged" and done.comment_id == 2511000004
    assert [m for m, _, _ in github.requests()] == ["POST", "GET", "GET"]


def test_a_link_to_another_host_is_not_followed(github: FakeGitHub) -> None:
    serve_comments(github)
    page1 = github.recorded("comments_page1.json")
    page1["headers"]["Link"] = '<https://evil.example/steal?page=2>; rel="next"'
    github.reply("GET", COMMENTS, page1)
    with pytest.raises(github_api.ApiError, match="refusing to follow a link away"):
        comment.post(github.client(), REPO, 7, body.Outcome("gate (gpu=l4)", 0, None, ARTIFACT))
    assert [p for _, p, _ in github.requests()] == ["/graphql", COMMENTS]


def test_action_step_posts_the_nothing_measured_body_over_an_old_red_comment(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The h100 comment says "failed"; this run's -k selected nothing: the comment must say so.
    serve_comments(github)
    github.reply("PATCH", f"/repos/{REPO}/issues/comments/2511000005", "comment_updated.json")
    folder = results_dir(tmp_path, H100, 5, None)
    env = github.env(tmp_path, RESULTS_DIR=str(folder), ARTIFACT_URL=ARTIFACT, GITHUB_EVENT_NAME="pull_request")
    assert comment.main(["post"], env) == 0
    method, path, sent = github.requests()[-1]
    assert (method, path) == ("PATCH", f"/repos/{REPO}/issues/comments/2511000005")
    assert sent["body"] == (
        f"{body.marker(H100)}\n## pytest-gpuperf · `gate (gpu=h100)`\n\n"
        f"Gate **failed** (pytest exit code 5: no tests were collected) · [results, HTML report and traces]({ARTIFACT})"
        "\n\nNo perf test measured in this run.\n"
    )
    assert "comment update (2511000005)" in capsys.readouterr().out


def test_fork_token_403_is_a_warning_and_a_summary_note(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_comments(github)
    github.reply("POST", f"/repos/{REPO}/issues/7/comments", "comment_forbidden.json")
    folder = results_dir(tmp_path, "gate (gpu=l4)", 1, real_report())
    env = github.env(tmp_path, RESULTS_DIR=str(folder), ARTIFACT_URL=ARTIFACT)
    assert comment.main(["post"], env) == 0  # the gate's exit code decides the job, not the comment
    method, path, sent = github.requests()[-1]
    assert (method, path) == ("POST", f"/repos/{REPO}/issues/7/comments")
    assert sent["body"].startswith(body.marker("gate (gpu=l4)"))
    out = capsys.readouterr().out
    assert out.startswith("::warning title=pytest-gpuperf::The pull-request comment was not posted")
    assert "HTTP 403: Resource not accessible by integration" in out
    note = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert note.startswith("\n> [!WARNING]\n> The pull-request comment was not posted")
    assert "gpuperf-comment workflow" in note


def test_no_pull_request_no_comment(github: FakeGitHub, tmp_path: Path) -> None:
    folder = tmp_path / "results"
    record.write(folder, record.GateRecord(key="gate", pull_request=None, exit_code=0, compare_ref="origin/main"))
    assert comment.main(["post"], github.env(tmp_path, RESULTS_DIR=str(folder), GITHUB_EVENT_NAME="push")) == 0
    assert github.requests() == []


def test_script_runs_the_way_the_action_runs_it(github: FakeGitHub, tmp_path: Path) -> None:
    # python -E -s ignores PYTHONPATH and the user site; the script's folder still holds its modules.
    serve_comments(github)
    github.reply("POST", f"/repos/{REPO}/issues/7/comments", "comment_created.json")
    folder = results_dir(tmp_path, "gate (gpu=l4)", 0, real_report())
    env = github.env(tmp_path, RESULTS_DIR=str(folder), ARTIFACT_URL=ARTIFACT)
    done = subprocess.run(
        [sys.executable, "-E", "-s", str(ACTION / "comment.py"), "post"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "comment create (2511000042)" in done.stdout
    assert github.requests()[-1][:2] == ("POST", f"/repos/{REPO}/issues/7/comments")


# --- the workflow_run comment workflow: artifacts of a fork's run ------------------------------


HOSTILE_MARKDOWN = (
    "@org/everyone please look ![](https://tracker.example/pixel.png) <img src=x onerror=alert(1)> "
    "[click](https://phish.example) **Gate passed**\n"
)


def artifacts(tmp_path: Path, key: str, number: int, session: Any = None) -> Path:
    """A fork's artifact: its gate record, its results data, and a comment.md it wrote itself."""
    folder = tmp_path / "artifacts"
    one = folder / "gpuperf-gate-l4-1a2b3c4d"
    record.write(one, record.GateRecord(key=key, pull_request=number, exit_code=0, compare_ref="origin/main"))
    write_results(one / comment.RESULTS, session or make_session())
    (one / record.REPORT).write_text(HOSTILE_MARKDOWN, encoding="utf-8")  # never posted
    return folder


def test_from_artifacts_posts_to_the_pull_request_whose_head_ran(github: FakeGitHub, tmp_path: Path) -> None:
    serve_comments(github)
    github.reply("GET", f"/repos/{REPO}/pulls/7", "pull_request_7.json")
    github.reply("POST", f"/repos/{REPO}/issues/7/comments", "comment_created.json")
    run = f"https://github.com/{REPO}/actions/runs/13572468"
    env = github.env(tmp_path, HEAD_SHA=HEAD_SHA, RUN_URL=run, RUN_CONCLUSION="failure")
    assert comment.main(["from-artifacts", str(artifacts(tmp_path, "gate (gpu=l4)", 7))], env) == 0
    # rebuilt from the results data; the outcome is GitHub's conclusion, not the artifact's exit code 0
    expected = body.comment_body(body.Outcome("gate (gpu=l4)", None, real_report(), run,
                                              verdict=body.run_line("failure")))  # fmt: skip
    assert github.requests() == [
        ("GET", f"/repos/{REPO}/pulls/7", None),
        ("POST", "/graphql", VIEWER),
        ("GET", COMMENTS, None),
        ("GET", PAGE_2, None),
        ("POST", f"/repos/{REPO}/issues/7/comments", {"body": expected}),
    ]
    posted = github.requests()[-1][2]["body"]
    assert "Gate **failed** (the workflow run's conclusion, from GitHub: failure)" in posted
    for forged in ("@org/everyone", "tracker.example", "<img", "phish.example", "Gate passed"):
        assert forged not in posted


def test_from_artifacts_sanitises_the_results_data_as_the_plugin_does(github: FakeGitHub, tmp_path: Path) -> None:
    serve_comments(github)
    github.reply("GET", f"/repos/{REPO}/pulls/7", "pull_request_7.json")
    github.reply("POST", f"/repos/{REPO}/issues/7/comments", "comment_created.json")
    hostile = make_session()
    first = hostile.results[0]
    measurement = dataclasses.replace(first.measurement, test_id="t.py::test_@org/team_<img src=x>_\u202egpj")
    hostile = dataclasses.replace(hostile, results=(dataclasses.replace(first, measurement=measurement),
                                                    *hostile.results[1:]))  # fmt: skip
    env = github.env(tmp_path, HEAD_SHA=HEAD_SHA, RUN_URL="https://github.com/x", RUN_CONCLUSION="success")
    assert comment.main(["from-artifacts", str(artifacts(tmp_path, "gate", 7, hostile))], env) == 0
    posted = github.requests()[-1][2]["body"]
    assert "Gate **passed**" in posted and "\u202e" not in posted
    assert "test_@org/team_<img src=x>_gpj" in posted  # inside a code span: inert, and shown as written


def test_from_artifacts_refuses_forged_results_naming_the_file_and_path(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    github.reply("GET", f"/repos/{REPO}/pulls/7", "pull_request_7.json")
    folder = artifacts(tmp_path, "gate", 7)
    results = next(folder.glob(f"*/{comment.RESULTS}"))
    doc = json.loads(results.read_text())
    doc["results"][0]["measurement"]["stats"]["median_ns"] = float("nan")
    results.write_text(json.dumps(doc))
    env = github.env(tmp_path, HEAD_SHA=HEAD_SHA, RUN_URL="https://github.com/x", RUN_CONCLUSION="success")
    assert comment.main(["from-artifacts", str(folder)], env) == 1
    assert github.requests() == [("GET", f"/repos/{REPO}/pulls/7", None)]  # nothing posted
    assert "$.results[0].measurement.stats.median_ns" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"[" * 100_000 + b"]" * 100_000, "nested too deeply"), (b"\xff\xfe\x00binary", "not UTF-8 text")],
)
@pytest.mark.parametrize("where", ["results", "record"])
def test_from_artifacts_refuses_an_unreadable_artifact_and_posts_the_one_beside_it(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, reason: str, where: str
) -> None:
    serve_comments(github)
    github.reply("GET", f"/repos/{REPO}/pulls/7", "pull_request_7.json")
    github.reply("POST", f"/repos/{REPO}/issues/7/comments", "comment_created.json")
    folder = artifacts(tmp_path, "gate", 7)
    bad = folder / "gpuperf-gate-a100-00000000"  # sorted first: refused before the good one is posted
    shutil.copytree(folder / "gpuperf-gate-l4-1a2b3c4d", bad)
    (bad / (comment.RESULTS if where == "results" else record.FILE)).write_bytes(content)
    env = github.env(tmp_path, HEAD_SHA=HEAD_SHA, RUN_URL="https://github.com/x", RUN_CONCLUSION="success")
    assert comment.main(["from-artifacts", str(folder)], env) == 1
    assert github.requests()[-1][:2] == ("POST", f"/repos/{REPO}/issues/7/comments")  # the readable one
    out = capsys.readouterr().out
    assert f"pytest-gpuperf::{bad.name}: " in out and reason in out and "Traceback" not in out


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ('{"format": "pytest-gpuperf-results", "schema_version": 5, "results": [' + "1" * 5000 + "]}",
         "at $.results[0]: an integer of 5000 digits is out of range"),
        ('{"format": "pytest-gpuperf-results", "schema_version": 4, "results": 5}', "at $.results: 5 is not of type"),
        ('{"format": "pytest-gpuperf-results", "schema_version": 1, "results": [{"comparisons": 5}]}',
         "at $.results[0].comparisons: 5 is not of type"),
    ],
)  # fmt: skip
def test_from_artifacts_refuses_results_no_version_holds_and_posts_the_one_beside_it(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str, reason: str
) -> None:
    serve_comments(github)
    github.reply("GET", f"/repos/{REPO}/pulls/7", "pull_request_7.json")
    github.reply("POST", f"/repos/{REPO}/issues/7/comments", "comment_created.json")
    folder = artifacts(tmp_path, "gate", 7)
    bad = folder / "gpuperf-gate-a100-00000000"  # sorted first: refused before the good one is posted
    shutil.copytree(folder / "gpuperf-gate-l4-1a2b3c4d", bad)
    (bad / comment.RESULTS).write_text(document)
    env = github.env(tmp_path, HEAD_SHA=HEAD_SHA, RUN_URL="https://github.com/x", RUN_CONCLUSION="success")
    assert comment.main(["from-artifacts", str(folder)], env) == 1
    assert github.requests()[-1][:2] == ("POST", f"/repos/{REPO}/issues/7/comments")  # the readable one
    out = capsys.readouterr().out
    assert f"pytest-gpuperf::{bad.name}: results file {bad / comment.RESULTS} {reason}" in out
    assert "Traceback" not in out


def test_from_artifacts_without_results_data_says_nothing_was_measured(github: FakeGitHub, tmp_path: Path) -> None:
    serve_comments(github)
    github.reply("GET", f"/repos/{REPO}/pulls/7", "pull_request_7.json")
    github.reply("POST", f"/repos/{REPO}/issues/7/comments", "comment_created.json")
    folder = artifacts(tmp_path, "gate", 7)
    next(folder.glob(f"*/{comment.RESULTS}")).unlink()
    env = github.env(tmp_path, HEAD_SHA=HEAD_SHA, RUN_URL="https://github.com/x", RUN_CONCLUSION="failure")
    assert comment.main(["from-artifacts", str(folder)], env) == 0
    posted = github.requests()[-1][2]["body"]
    assert body.NOTHING_MEASURED in posted and "phish.example" not in posted


def test_from_artifacts_refuses_a_pull_request_with_another_head(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    github.reply("GET", f"/repos/{REPO}/pulls/7", "pull_request_7.json")
    env = github.env(tmp_path, HEAD_SHA="f" * 40, RUN_URL="https://github.com/x", RUN_CONCLUSION="success")
    assert comment.main(["from-artifacts", str(artifacts(tmp_path, "gate", 7))], env) == 0
    assert github.requests() == [("GET", f"/repos/{REPO}/pulls/7", None)]
    assert "does not have ffffffffffff as its head; not posted" in capsys.readouterr().out


def test_from_artifacts_rejects_a_malformed_gate_record(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "artifacts" / "gpuperf-x"
    folder.mkdir(parents=True)
    (folder / record.FILE).write_text(json.dumps({"key": "gate", "pull_request": "7; rm -rf", "exit_code": 1,
                                                  "compare_ref": "origin/main"}))  # fmt: skip
    env = github.env(tmp_path, HEAD_SHA=HEAD_SHA, RUN_URL="https://github.com/x", RUN_CONCLUSION="success")
    assert comment.main(["from-artifacts", str(tmp_path / "artifacts")], env) == 1
    assert github.requests() == []
    assert "field 'pull_request' must be int or null" in capsys.readouterr().out


# --- forks: the route and the required check ---------------------------------------------------


def event_payload(name: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return payload


def no_reviews(number: int) -> list[dict[str, Any]]:
    raise AssertionError("a pull request from this repository needs no review lookup")


def test_route_gates_a_branch_of_this_repository_without_asking_for_reviews() -> None:
    decided = forks.route("pull_request", event_payload("event_pull_request.json"), REPO, no_reviews)
    assert decided == forks.Route(True, "pull request from a branch of this repository")
    assert forks.route("push", {}, REPO, no_reviews).gate
    assert forks.route("workflow_dispatch", {}, REPO, no_reviews).gate


def test_route_does_not_gate_an_unapproved_fork() -> None:
    reviews = json.loads((DATA / "reviews_not_approved.json").read_text())["body"]
    decided = forks.route("pull_request", event_payload("event_pull_request_fork.json"), REPO, lambda n: reviews)
    assert not decided.gate
    assert decided.reason.startswith("not gated: fork pull request from contrib-dev/pytest-gpuperf.")
    assert "approves the pull request at its head commit a1b2c3d4e5f6; then re-run this workflow" in decided.reason


def test_route_gates_a_fork_approved_at_its_head_by_a_maintainer() -> None:
    reviews = json.loads((DATA / "reviews_approved.json").read_text())["body"]
    decided = forks.route("pull_request", event_payload("event_pull_request_fork.json"), REPO, lambda n: reviews)
    assert decided == forks.Route(
        True, "fork pull request from contrib-dev/pytest-gpuperf, approved at a1b2c3d4e5f6 by maintainer-ann"
    )


def test_approval_counts_only_a_maintainers_latest_review_of_the_head() -> None:
    head = HEAD_SHA
    review = {"user": {"login": "bob"}, "commit_id": head, "state": "APPROVED", "author_association": "COLLABORATOR"}
    assert forks.approver([review], head) == "bob"
    assert forks.approver([review], "0" * 40) is None  # approved another commit
    assert forks.approver([{**review, "author_association": "CONTRIBUTOR"}], head) is None
    assert forks.approver([{**review, "author_association": "NONE"}], head) is None
    assert forks.approver([review, {**review, "state": "CHANGES_REQUESTED"}], head) is None
    assert forks.approver([review, {**review, "state": "DISMISSED"}], head) is None
    assert forks.approver([{**review, "state": "COMMENTED"}, review], head) == "bob"


def test_route_never_gates_pull_request_target_or_a_deleted_fork() -> None:
    assert not forks.route("pull_request_target", event_payload("event_pull_request.json"), REPO, no_reviews).gate
    payload = event_payload("event_pull_request_fork.json")
    payload["pull_request"]["head"]["repo"] = None
    decided = forks.route("pull_request", payload, REPO, lambda n: [])
    assert not decided.gate and "from a deleted repository" in decided.reason


def test_route_step_reads_reviews_and_sets_outputs(github: FakeGitHub, tmp_path: Path) -> None:
    github.reply("GET", f"/repos/{REPO}/pulls/7/reviews?per_page=100", "reviews_not_approved.json")
    env = github.env(tmp_path, GITHUB_EVENT_NAME="pull_request",
                     GITHUB_EVENT_PATH=str(DATA / "event_pull_request_fork.json"))  # fmt: skip
    assert forks.main(["route"], env) == 0
    assert github.requests() == [("GET", f"/repos/{REPO}/pulls/7/reviews?per_page=100", None)]
    outputs = read_outputs(Path(env["GITHUB_OUTPUT"]))
    assert outputs["gate"] == "false"
    assert outputs["reason"].startswith("not gated: fork pull request from contrib-dev/pytest-gpuperf.")


@pytest.mark.parametrize(
    ("gate", "reason", "result", "ok", "message"),
    [
        ("true", "pull request from a branch", "success", True, "perf gate passed"),
        ("true", "pull request from a branch", "failure", False, "perf gate failed"),
        ("true", "pull request from a branch", "cancelled", False, "perf gate cancelled"),
        ("true", "pull request from a branch", "skipped", False, "perf gate skipped although the route allowed it"),
        ("false", "not gated: fork pull request from a/b. ...", "skipped", False, "not gated: fork pull request"),
        ("", "", "skipped", False, "the route job did not decide"),
    ],
)
def test_the_required_check(gate: str, reason: str, result: str, ok: bool, message: str) -> None:
    passed, text = forks.conclude(gate, reason, result)
    assert passed is ok
    assert text.startswith(message)


def test_check_step_fails_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"GATE": "false", "REASON": "not gated: fork pull request from a/b.", "GATE_RESULT": "skipped",
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}  # fmt: skip
    assert forks.main(["conclude"], env) == 1
    assert capsys.readouterr().out == "::error title=pytest-gpuperf::not gated: fork pull request from a/b.\n"
    assert (
        tmp_path / "summary.md"
    ).read_text() == "## pytest-gpuperf check\n\n❌ not gated: fork pull request from a/b.\n"


# --- prepare: key, base, fetch, cache key -------------------------------------------------------


def read_outputs(path: Path) -> dict[str, str]:
    """Parse the heredoc form of GITHUB_OUTPUT, as the runner does."""
    values: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        name, _, delimiter = line.partition("<<")
        value = []
        for inner in lines:
            if inner == delimiter:
                break
            value.append(inner)
        values[name] = "\n".join(value)
    return values


def test_comment_key_defaults_to_the_job_and_matrix_values() -> None:
    assert prepare.comment_key("", "gate", "null") == "gate"
    assert prepare.comment_key("", "gate", "") == "gate"
    assert prepare.comment_key("", "gate", "{}") == "gate"
    matrix = json.dumps({"python": "3.11", "gpu": {"name": "h100", "count": 2}})
    assert prepare.comment_key("", "perf", matrix) == 'perf (gpu={"count":2,"name":"h100"}, python=3.11)'
    assert prepare.comment_key("  GPU  perf\n", "gate", matrix) == "GPU perf"
    long_key = prepare.comment_key("", "gate", json.dumps({"v": "x" * 500}))
    assert len(long_key) == record.KEY_MAX and long_key != prepare.comment_key("", "gate", json.dumps({"v": "x" * 501}))
    with pytest.raises(workflow.ActionError, match="comment-key"):
        prepare.comment_key("", "", "null")


def test_the_gate_record_keeps_the_jobs_own_id_for_the_matrix_comment(tmp_path: Path) -> None:
    assert prepare.job_id({"JOB_ID": "33301"}) == 33301
    assert prepare.job_id({"JOB_ID": ""}) is None and prepare.job_id({}) is None  # a runner that does not say it
    assert prepare.job_id({"JOB_ID": "x1"}) is None
    folder = tmp_path / "r"
    record.write(folder, record.GateRecord("perf (gpu=h100)", 7, 1, "origin/main", 33301))
    assert record.load(folder).job_id == 33301
    legacy = json.loads((folder / record.FILE).read_text())
    del legacy["job_id"]  # written by an older action
    (folder / record.FILE).write_text(json.dumps(legacy))
    assert record.load(folder).job_id is None
    legacy["job_id"] = "33301"
    (folder / record.FILE).write_text(json.dumps(legacy))
    with pytest.raises(workflow.ActionError, match="field 'job_id' must be int or null"):
        record.load(folder)


def test_slug_is_a_safe_name_and_distinct_per_key() -> None:
    a, b = prepare.slug("gate (gpu=a/b)"), prepare.slug("gate (gpu=a-b)")
    assert a != b
    assert a.startswith("gate-gpu-a-b-") and all(c.isalnum() or c in "-._" for c in a)


def test_base_from_the_event_or_the_input() -> None:
    pr = event_payload("event_pull_request.json")
    sha = pr["pull_request"]["base"]["sha"]
    assert prepare.base("pull_request", pr, "") == prepare.Base(f"+{sha}:refs/remotes/origin/main", "origin/main")
    group = {"merge_group": {"base_sha": sha, "base_ref": "refs/heads/release/2.x"}}
    assert prepare.base("merge_group", group, "").compare_ref == "origin/release/2.x"
    assert prepare.base("push", {}, "main") == prepare.Base("+refs/heads/main:refs/remotes/origin/main", "origin/main")
    assert prepare.base("push", {}, "refs/heads/dev") == prepare.Base(
        "+refs/heads/dev:refs/remotes/origin/dev", "origin/dev"
    )
    assert prepare.base("push", {}, "refs/tags/v1.2") == prepare.Base(
        "+refs/tags/v1.2:refs/tags/v1.2", "refs/tags/v1.2"
    )
    assert prepare.base("push", {}, sha) == prepare.Base(sha, sha)
    for bad in ("--upload-pack=x", "a..b", "main:evil", "a b", "dev/"):
        with pytest.raises(workflow.ActionError, match=r"base-ref .* is not a branch"):
            prepare.base("pull_request", pr, bad)
    with pytest.raises(
        workflow.ActionError, match="a push event has no base to compare against: give the action a base-ref"
    ):
        prepare.base("push", {}, "")


def test_prepare_refuses_pull_request_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"GITHUB_EVENT_NAME": "pull_request_target", "GITHUB_OUTPUT": str(tmp_path / "out")}
    assert prepare.main(env) == 1
    assert "pull_request_target runs with a write token" in capsys.readouterr().out


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def origin_with_a_pull_request(tmp_path: Path, base_test: str, head_test: str) -> tuple[Path, str, str]:
    """A repository with three commits on main and a PR branch; returns it, the base and head SHAs."""
    src = tmp_path / "origin"
    src.mkdir()
    git(src, "init", "-q", "-b", "main")
    git(src, "config", "user.email", "t@example.com")
    git(src, "config", "user.name", "t")
    git(src, "config", "uploadpack.allowReachableSHA1InWant", "true")  # as GitHub serves a SHA
    for i in range(3):
        (src / "history.txt").write_text(f"{i}\n")
        (src / "test_perf.py").write_text(base_test)
        git(src, "add", "-A")
        git(src, "commit", "-qm", f"main {i}")
    base_sha = git(src, "rev-parse", "HEAD")
    git(src, "checkout", "-qb", "feature")
    (src / "test_perf.py").write_text(head_test)
    (src / "history.txt").write_text("the pull request\n")
    git(src, "commit", "-qam", "the pull request")
    return src, base_sha, git(src, "rev-parse", "HEAD")


def shallow_checkout(tmp_path: Path, src: Path) -> Path:
    """What actions/checkout with fetch-depth 1 leaves: the head commit alone."""
    work = tmp_path / "workspace"
    git(tmp_path, "clone", "-q", "--depth=1", "--branch=feature", src.as_uri(), str(work))
    return work


def pr_event(tmp_path: Path, base_sha: str, head_sha: str) -> Path:
    payload = event_payload("event_pull_request.json")
    payload["pull_request"]["base"]["sha"] = base_sha
    payload["pull_request"]["head"]["sha"] = head_sha
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return path


def action_env(tmp_path: Path, work: Path, event_path: Path, **extra: str) -> dict[str, str]:
    runner_temp = tmp_path / "runner_temp"
    runner_temp.mkdir(exist_ok=True)
    for name in ("github_output", "step_summary"):
        (tmp_path / name).touch()
    return {
        **os.environ,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_JOB": "gate",
        "MATRIX": json.dumps({"gpu": "h100"}),
        "GITHUB_WORKSPACE": str(work),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "13572468",
        "RUNNER_TEMP": str(runner_temp),
        "RUNNER_OS": "Linux",
        "RUNNER_ARCH": "X64",
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary"),
        "INPUT_INSTALL": 'python -m pip install "$GITHUB_ACTION_PATH"',
        "GITHUB_TOKEN": "",
        **extra,
    }


def test_prepare_fetches_the_base_commit_alone_into_a_shallow_checkout(tmp_path: Path) -> None:
    src, base_sha, head_sha = origin_with_a_pull_request(tmp_path, "x = 1\n", "x = 2\n")
    work = shallow_checkout(tmp_path, src)
    env = action_env(tmp_path, work, pr_event(tmp_path, base_sha, head_sha), JOB_ID="33301")
    assert prepare.main(env) == 0
    outputs = read_outputs(Path(env["GITHUB_OUTPUT"]))
    assert outputs["key"] == H100
    assert outputs["base-ref"] == "origin/main"
    assert git(work, "rev-parse", "origin/main") == base_sha
    assert git(work, "rev-parse", "--is-shallow-repository") == "true"
    assert git(work, "rev-list", "--count", "--all") == "2"  # head and base, none of main's history
    results = Path(outputs["results-dir"])
    assert results == tmp_path / "runner_temp" / f"gpuperf-{prepare.slug(H100)}"
    assert record.load(results) == record.GateRecord(H100, 7, None, "origin/main", job_id=33301)
    assert outputs["cache-key"].startswith(outputs["cache-prefix"])
    assert outputs["cache-prefix"] == "gpuperf-pip-linux-x64-py{}.{}-".format(*sys.version_info[:2])
    assert "extraheader" not in (work / ".git" / "config").read_text()


def test_prepare_keeps_a_full_checkout_full(tmp_path: Path) -> None:
    src, base_sha, head_sha = origin_with_a_pull_request(tmp_path, "x = 1\n", "x = 2\n")
    work = tmp_path / "workspace"
    git(tmp_path, "clone", "-q", "--branch=feature", src.as_uri(), str(work))
    assert prepare.main(action_env(tmp_path, work, pr_event(tmp_path, base_sha, head_sha))) == 0
    assert git(work, "rev-parse", "--is-shallow-repository") == "false"
    assert git(work, "rev-list", "--count", "HEAD") == "4"


def test_prepare_names_a_base_that_cannot_be_fetched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, _, head_sha = origin_with_a_pull_request(tmp_path, "x = 1\n", "x = 2\n")
    work = shallow_checkout(tmp_path, src)
    env = action_env(tmp_path, work, pr_event(tmp_path, "e" * 40, head_sha))
    assert prepare.main(env) == 1
    assert f"could not fetch the base '+{'e' * 40}:refs/remotes/origin/main' from origin" in capsys.readouterr().out


def test_auth_env_gives_the_token_to_one_command(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    extra = prepare.auth_env("ghs_abc", "https://github.com/", tmp_path)
    assert extra == {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.https://github.com/.extraheader",
        "GIT_CONFIG_VALUE_0": "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX2FiYw==",
    }
    assert prepare.auth_env("", "https://github.com", tmp_path) == {}
    # a checkout that kept its credentials already sends the header: a second one would be refused
    git(tmp_path, "config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic xyz")
    assert prepare.auth_env("ghs_abc", "https://github.com", tmp_path) == {}


def test_cache_key_follows_the_install_inputs() -> None:
    key, prefix = prepare.cache_key('pip install "$GITHUB_ACTION_PATH"', "3.11", b"deps", "Linux", "X64")
    assert prefix == "gpuperf-pip-linux-x64-py3.11-" and key.startswith(prefix)
    assert key == prepare.cache_key('pip install "$GITHUB_ACTION_PATH"', "3.11", b"deps", "Linux", "X64")[0]
    others = {
        prepare.cache_key("pip install torch==2.5.1 .", "3.11", b"deps", "Linux", "X64")[0],
        prepare.cache_key('pip install "$GITHUB_ACTION_PATH"', "3.12", b"deps", "Linux", "X64")[0],
        prepare.cache_key('pip install "$GITHUB_ACTION_PATH"', "3.11", b"deps2", "Linux", "X64")[0],
        prepare.cache_key('pip install "$GITHUB_ACTION_PATH"', "3.11", b"deps", "Linux", "ARM64")[0],
    }
    assert key not in others and len(others) == 4


# --- the gate's command line, and a real gate end to end ----------------------------------------


def test_pytest_command_line(tmp_path: Path) -> None:
    command = run_gate.pytest_command(
        "/venv/bin/python", "tests/perf 'tests/more perf'", "origin/main", tmp_path, True, "-k 'attn and not slow' -x"
    )
    assert command == [
        "/venv/bin/python", "-m", "pytest", "tests/perf", "tests/more perf",
        "--gpuperf", "--gpuperf-compare-ref=origin/main",
        f"--gpuperf-json={tmp_path / 'results.json'}",
        f"--gpuperf-markdown={tmp_path / 'comment.md'}",
        f"--gpuperf-html={tmp_path / 'report.html'}",
        f"--gpuperf-profile={tmp_path / 'traces'}",
        "-k", "attn and not slow", "-x",
    ]  # fmt: skip
    assert "--gpuperf-profile" not in " ".join(run_gate.pytest_command("p", "t", "b", tmp_path, False, ""))
    with pytest.raises(workflow.ActionError, match="the suite input is empty"):
        run_gate.pytest_command("p", "  ", "b", tmp_path, False, "")
    with pytest.raises(workflow.ActionError, match="cannot split"):
        run_gate.pytest_command("p", "t", "b", tmp_path, False, "-k 'unclosed")


PERF_TEST = """
def test_spin(gpu_bench):
    gpu_bench(lambda: sum(i * i for i in range({work})))
"""
# A threshold of 300%: the same code on both sides passes however noisy the machine.
FAST = "--gpuperf-warmup-time=0.02 --gpuperf-min-time=0.05 --gpuperf-max-time=0.3 --gpuperf-threshold=3"


@pytest.mark.slow
def test_gate_end_to_end_on_a_real_repository(github: FakeGitHub, tmp_path: Path) -> None:
    """prepare -> run_gate -> summary -> comment, as action.yml runs them, on a shallow checkout."""
    src, base_sha, head_sha = origin_with_a_pull_request(
        tmp_path, PERF_TEST.format(work=20000), PERF_TEST.format(work=20000)
    )
    work = shallow_checkout(tmp_path, src)
    env = action_env(tmp_path, work, pr_event(tmp_path, base_sha, head_sha))
    assert prepare.main(env) == 0
    outputs = read_outputs(Path(env["GITHUB_OUTPUT"]))
    results = Path(outputs["results-dir"])
    gate_env = {**env, "PYTHON": sys.executable, "SUITE": "test_perf.py", "PYTEST_ARGS": FAST,
                "PROFILE": "false", "RESULTS_DIR": str(results)}  # fmt: skip
    assert run_gate.main(gate_env, cwd=work) == 0
    assert read_outputs(Path(env["GITHUB_OUTPUT"]))["exit-code"] == "0"
    assert record.load(results).exit_code == 0
    assert {p.name for p in results.iterdir()} >= {"gate.json", "results.json", "comment.md", "report.html"}
    report = (results / "comment.md").read_text(encoding="utf-8")
    assert "against `origin/main`" in report and "test_perf.py::test_spin" in report

    serve_comments(github)
    github.reply("PATCH", f"/repos/{REPO}/issues/comments/2511000005", "comment_updated.json")
    step_env = {**github.env(tmp_path), "RESULTS_DIR": str(results), "ARTIFACT_URL": ARTIFACT,
                "GITHUB_STEP_SUMMARY": env["GITHUB_STEP_SUMMARY"]}  # fmt: skip
    assert summary.main(step_env) == 0
    assert comment.main(["post"], step_env) == 0
    text = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "Gate **passed** (pytest exit code 0: all tests passed)" in text and "`test_perf.py::test_spin`" in text
    sent = github.requests()[-1]
    assert sent[:2] == ("PATCH", f"/repos/{REPO}/issues/comments/2511000005")
    assert sent[2]["body"] == body.comment_body(body.Outcome(H100, 0, report, ARTIFACT))


@pytest.mark.slow
def test_gate_that_selects_nothing_reports_nothing_measured(tmp_path: Path) -> None:
    src, base_sha, head_sha = origin_with_a_pull_request(tmp_path, PERF_TEST.format(work=10), PERF_TEST.format(work=10))
    work = shallow_checkout(tmp_path, src)
    env = action_env(tmp_path, work, pr_event(tmp_path, base_sha, head_sha))
    assert prepare.main(env) == 0
    results = Path(read_outputs(Path(env["GITHUB_OUTPUT"]))["results-dir"])
    gate_env = {**env, "PYTHON": sys.executable, "SUITE": "test_perf.py", "PYTEST_ARGS": "-k no_such_test",
                "RESULTS_DIR": str(results)}  # fmt: skip
    assert run_gate.main(gate_env, cwd=work) == 0
    assert read_outputs(Path(env["GITHUB_OUTPUT"]))["exit-code"] == "5"
    assert not (results / "comment.md").exists()
    assert summary.main({**env, "RESULTS_DIR": str(results)}) == 0
    text = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "Gate **failed** (pytest exit code 5: no tests were collected)" in text
    assert "No perf test measured in this run." in text


# --- the comment workflow as it runs: its own install line in a clean venv ----------------------

COMMENT_WORKFLOW = ROOT / ".github" / "workflows" / "gpuperf-comment.yml"


def workflow_step_run(text: str, holding: str) -> str:
    """The shell script of the workflow step whose ``run:`` holds ``holding``, as the runner gets it.

    A literal block (``|``) keeps its lines; a folded one (``>-``) joins them with spaces.
    """
    for block in re.finditer(r"^(\s*)(?:- )?run: (?:([|>]-?)\n((?:\1\s+.*\n?)+)|(.+))", text, re.M):
        lines = [line.strip() for line in block.group(3).splitlines()] if block.group(3) else [block.group(4)]
        script = "\n".join(lines) if (block.group(2) or "|").startswith("|") else " ".join(lines)
        if holding in script:
            return script
    raise AssertionError(f"no run block holds {holding!r}")


def requirements(script: str) -> list[str]:
    """The quoted requirements (``"name==version"``) a ``pip install`` line names."""
    return re.findall(r'"([A-Za-z0-9_.\[\]-]+==[0-9.]+)"', script)


def test_the_comment_workflow_posts_with_only_what_its_own_install_line_installs(
    github: FakeGitHub, tmp_path: Path
) -> None:
    """The workflow's steps, read from its file and run as written: a sparse checkout, a fresh venv, from-artifacts."""
    text = COMMENT_WORKFLOW.read_text()
    sparse = re.search(r"sparse-checkout: \|\n((?:\s+\S+\n)+)", text)
    assert sparse
    checkout = tmp_path / "checkout"
    for folder in sparse.group(1).split():  # only what the sparse checkout brings
        shutil.copytree(ROOT / folder, checkout / folder, ignore=shutil.ignore_patterns("__pycache__"))
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    artifacts(tmp_path, "gate", 7).rename(runner_temp / "gpuperf-artifacts")
    install = workflow_step_run(text, "-m venv")
    on_runner = {**os.environ, "RUNNER_TEMP": str(runner_temp)}
    done = subprocess.run(["bash", "-e", "-c", install], cwd=checkout, env=on_runner, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    serve_comments(github)
    github.reply("GET", f"/repos/{REPO}/pulls/7", "pull_request_7.json")
    github.reply("POST", f"/repos/{REPO}/issues/7/comments", "comment_created.json")
    env = github.env(tmp_path, RUNNER_TEMP=str(runner_temp), HEAD_SHA=HEAD_SHA, RUN_URL="https://github.com/x",
                     RUN_CONCLUSION="success")  # fmt: skip
    post = workflow_step_run(text, "comment.py from-artifacts")
    done = subprocess.run(["bash", "-e", "-c", post], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    method, path, sent = github.requests()[-1]
    assert (method, path) == ("POST", f"/repos/{REPO}/issues/7/comments")
    rebuilt = body.Outcome("gate", None, real_report(), "https://github.com/x", verdict=body.run_line("success"))
    assert sent["body"] == body.comment_body(rebuilt)  # the report, rebuilt in the clean venv


def test_the_docs_comment_workflow_installs_what_this_repositorys_does() -> None:
    wanted = requirements(workflow_step_run(COMMENT_WORKFLOW.read_text(), "-m venv"))
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "action.md").read_text(), re.S)
    [documented] = [b for b in blocks if "comment.py from-artifacts" in b]
    assert wanted and requirements(workflow_step_run(documented, "-m venv")) == wanted
