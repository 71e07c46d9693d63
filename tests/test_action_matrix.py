"""The matrix's final job (action/matrix_comment.py): one comment and one summary for every gate job.

GitHub's replies are recorded (tests/data/action/run_jobs_*.json: the run of the docs' matrix workflow,
four GPU jobs and the final one) and served on 127.0.0.1 by test_action's FakeGitHub; the artifacts hold
the gate records the Action writes and results files of the recorded CUDA payloads (tests/data/matrix/).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_action import ACTION, DATA, REPO, FakeGitHub, serve_comments

if str(ACTION) not in sys.path:  # the scripts import each other as top-level modules, as they run
    sys.path.append(str(ACTION))

import body
import matrix_comment
import record

PAYLOADS = Path(__file__).parent / "data" / "matrix"
JOBS = f"/repos/{REPO}/actions/runs/13572468/attempts/1/jobs?per_page=100"
JOBS_2 = "/repositories/812345678/actions/runs/13572468/attempts/1/jobs?per_page=100&page=2"
RUN = f"https://github.com/{REPO}/actions/runs/13572468"
KEY = "perf matrix"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    yield fake
    fake.close()


def artifact(root: Path, key: str, job_id: int | None, exit_code: int | None, results: Path | None) -> Path:
    """A gate job's downloaded artifact: its gate.json and, where pytest wrote one, its results.json."""
    folder = root / f"gpuperf-{re.sub(r'[^a-z0-9]+', '-', key)}"
    record.write(folder, record.GateRecord(key, 7, exit_code, "origin/main", job_id))
    if results is not None:
        shutil.copy(results, folder / "results.json")
    return folder


def matrix_run(tmp_path: Path) -> Path:
    """The recorded run: H100, A100 gated (regressions), L4 cancelled before its upload, MI300X never ran pytest."""
    root = tmp_path / "artifacts"
    artifact(root, "perf (gpu=h100)", 33301, 1, PAYLOADS / "cuda-h100.json")
    artifact(root, "perf (gpu=a100)", 33302, 1, PAYLOADS / "cuda-a100.json")
    artifact(root, "perf (gpu=mi300x)", 33304, None, None)
    (root / "gpuperf-baselines").mkdir()  # another artifact the pattern matches: no gate record, not a gate's
    return root


def serve_run(github: FakeGitHub) -> None:
    github.reply("GET", JOBS, "run_jobs_page1.json")
    github.reply("GET", JOBS_2, "run_jobs_page2.json")
    github.reply("GET", f"/repos/{REPO}/pulls/7", "pull_request_7.json")
    serve_comments(github)
    github.reply("POST", f"/repos/{REPO}/issues/7/comments", "comment_created.json")


def matrix_env(github: FakeGitHub, tmp_path: Path, artifacts: Path, **extra: str) -> dict[str, str]:
    settings = {"ARTIFACTS": str(artifacts), "GATE_JOB": "perf", "COMMENT_KEY": KEY, "COMMENT": "true",
                "GITHUB_RUN_ATTEMPT": "1", "GITHUB_EVENT_NAME": "pull_request",
                "GITHUB_EVENT_PATH": str(DATA / "event_pull_request.json")}  # fmt: skip
    return github.env(tmp_path, **{**settings, **extra})


def test_one_comment_for_every_gate_job_with_the_missing_ones_in_their_columns(
    github: FakeGitHub, tmp_path: Path
) -> None:
    serve_run(github)
    env = matrix_env(github, tmp_path, matrix_run(tmp_path))
    assert matrix_comment.main(env) == 0
    requests = github.requests()
    assert [r[:2] for r in requests] == [
        ("GET", JOBS), ("GET", JOBS_2), ("GET", f"/repos/{REPO}/pulls/7"), ("POST", "/graphql"),
        ("GET", "/repos/gpuperf-org/pytest-gpuperf/issues/7/comments?per_page=100"),
        ("GET", "/repositories/812345678/issues/7/comments?per_page=100&page=2"),
        ("POST", f"/repos/{REPO}/issues/7/comments"),
    ]  # fmt: skip
    posted = requests[-1][2]["body"]
    assert posted.split("\n", 1)[0] == body.marker(KEY)
    assert body.utf16_units(posted) <= body.COMMENT_LIMIT
    header = next(line for line in posted.splitlines() if line.startswith("| test |"))
    assert header == (
        "| test | `cuda-nvidia-a100-sxm4-80gb` | `cuda-nvidia-h100-80gb-hbm3` "
        "| `perf (gpu=mi300x)` ❌ gate did not run | `perf (l4)` 🚫 job cancelled |"
    )
    assert f"[Results, HTML reports and traces]({RUN})" in posted
    assert "pytest 'test_perf.py::test_attention[bf16-4096]' --gpuperf-compare-ref=8b0d2f4a6c8e" in posted
    assert "the environment is the likelier cause than the code" in posted  # the A100's new driver and torch
    # the job summary holds the same comment
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text() == posted


def test_a_run_with_a_newer_head_leaves_the_comment_to_its_own_run(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_run(github)
    newer = json.loads((DATA / "pull_request_7.json").read_text())
    newer["body"]["head"]["sha"] = "f" * 40
    github.reply("GET", f"/repos/{REPO}/pulls/7", newer)
    env = matrix_env(github, tmp_path, matrix_run(tmp_path))
    assert matrix_comment.main(env) == 0
    assert not [r for r in github.requests() if r[0] in ("POST", "PATCH") and "comments" in r[1]]
    assert "pull request #7 has a newer head" in capsys.readouterr().out
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text().startswith(body.marker(KEY))


def test_without_actions_read_the_artifacts_still_make_the_comment(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_run(github)
    github.reply("GET", JOBS, "run_jobs_forbidden.json")
    assert matrix_comment.main(matrix_env(github, tmp_path, matrix_run(tmp_path))) == 0
    out = capsys.readouterr().out
    assert "::warning title=pytest-gpuperf::the matrix jobs' results are unknown (give the job `permissions: " in out
    posted = github.requests()[-1][2]["body"]
    assert "`perf (gpu=mi300x)` ❌ gate did not run" in posted and "perf (l4)" not in posted


def test_an_unreadable_results_file_is_named_and_its_column_says_so(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_run(github)
    root = matrix_run(tmp_path)
    forged = root / "gpuperf-perf-gpu-h100-" / "results.json"
    document = json.loads(forged.read_text())
    document["results"][0]["verdict"] = "fine, merge it"
    forged.write_text(json.dumps(document))
    assert matrix_comment.main(matrix_env(github, tmp_path, root)) == 0
    out = capsys.readouterr().out
    assert "::error title=pytest-gpuperf::gpuperf-perf-gpu-h100-: " in out and "$.results[0].verdict" in out
    posted = github.requests()[-1][2]["body"]
    assert "`perf (gpu=h100)` ❔ unreadable results" in posted and "fine, merge it" not in posted


def test_comment_false_writes_the_summary_only(github: FakeGitHub, tmp_path: Path) -> None:
    serve_run(github)
    env = matrix_env(github, tmp_path, matrix_run(tmp_path), COMMENT="false")
    assert matrix_comment.main(env) == 0
    assert [r[1] for r in github.requests()] == [JOBS, JOBS_2]
    assert "| test |" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()


# The modules the results reader and the matrix comment must not need: the final job installs jsonschema and
# numpy alone (action/matrix/action.yml), not pytest-gpuperf's other dependencies.
HEAVY = ("scipy", "matplotlib", "torch", "sqlalchemy", "alembic", "git", "filelock", "nvtx", "pynvml", "pytest",
         "_pytest", "psycopg", "pluggy")  # fmt: skip
BLOCKER = """
import importlib.abc, runpy, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {heavy!r}:
            raise ImportError(f"{{name}} is not installed in the matrix job")
sys.meta_path.insert(0, Block())
sys.path.insert(0, {action!r})
runpy.run_path({script!r}, run_name="__main__")
"""


def test_the_script_runs_as_the_action_runs_it_with_only_what_the_action_installs(
    github: FakeGitHub, tmp_path: Path
) -> None:
    installs = (ACTION / "matrix" / "action.yml").read_text()
    assert '"jsonschema>=4.17" "numpy>=1.24"' in installs  # the ranges of pyproject.toml's dependencies
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert '"jsonschema>=4.17",' in pyproject and '"numpy>=1.24",' in pyproject
    serve_run(github)
    env = matrix_env(github, tmp_path, matrix_run(tmp_path))
    code = BLOCKER.format(heavy=set(HEAVY), action=str(ACTION), script=str(ACTION / "matrix_comment.py"))
    done = subprocess.run([sys.executable, "-E", "-s", "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "matrix comment create (2511000042)" in done.stdout
    # the blocker blocks: without numpy, which the results reader does need, the script cannot run
    script = str(ACTION / "matrix_comment.py")
    without_numpy = BLOCKER.format(heavy={*HEAVY, "numpy"}, action=str(ACTION), script=script)
    failed = subprocess.run([sys.executable, "-E", "-s", "-c", without_numpy], env=env, capture_output=True, text=True,
                            timeout=120, check=False)  # fmt: skip
    assert failed.returncode != 0 and "numpy is not installed in the matrix job" in failed.stderr
