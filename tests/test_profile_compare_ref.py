"""Compare-ref: a regression is profiled at the head here and at the base in its worker, then diffed (by operator,
or by Python function where the call runs no torch operator)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from profile_plants import DUMP_CONFTEST, DUMP_HOOK, MODELS, PYTHON_SUITE

pytestmark = pytest.mark.slow

ARGS = (
    "--gpuperf", "--gpuperf-compare-ref=HEAD~1", "--gpuperf-confirm-pairs=0", "-p", "no:cacheprovider",
    "--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.4", "--gpuperf-threshold=0.25",
)  # fmt: skip


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


def commit_both_sides(pytester: pytest.Pytester) -> Path:
    """The models at the base commit, and with the extra op and the slower custom op at the head."""
    root = pytester.path
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    pytester.makeconftest(DUMP_CONFTEST)
    pytester.makepyfile(test_models=MODELS)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    pytester.makepyfile(test_models=MODELS.replace('os.environ.get("PLANT", "")', '"extra,custom"'))
    git(root, "commit", "-qam", "head")
    return root


def test_both_sides_are_profiled_and_the_responsible_operator_comes_first(pytester: pytest.Pytester) -> None:
    root = commit_both_sides(pytester)
    chosen = ("-k", "forward or custom or steady")
    result = pytester.runpytest_subprocess(*ARGS, "--gpuperf-json=out/results.json", *chosen)
    result.assert_outcomes(failed=2, passed=1)
    found = json.loads((root / "diffs.json").read_text())
    forward, custom = found["test_forward"]["diff"], found["test_custom"]["diff"]
    assert forward["rows"][0] == ["aten::mm", "appeared", True]
    assert custom["rows"][0][:2] == ["demo::blur", "changed"]
    # the explanation of the measured change: the added matmul leads as a cause, the slower custom op likewise
    assert forward["why"][0] == ["aten::mm", "appeared", "cause"] and forward["measured"] > 0
    assert custom["why"][0] == ["demo::blur", "slower", "cause"] and custom["finding"] == "explained"
    assert forward["has_base"] and forward["label"].startswith("ref HEAD~1 (")
    for side in ("head_trace", "base_trace"):  # beside the first report, for a CI job to upload
        trace = Path(custom[side])
        assert trace.parent == root / "out" / "gpuperf-profiles"
        assert "traceEvents" in json.loads(trace.read_text())
    assert found["test_steady"]["diff"] is None


def test_a_pure_python_suite_is_explained_by_function_on_both_sides(pytester: pytest.Pytester) -> None:
    """torch is installed, but the measured call runs no torch operator: both sides are profiled by Python function,
    the base in its own worktree, and the function with the planted slowdown leads."""
    root = pytester.path
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    pytester.makeconftest(DUMP_HOOK)
    pytester.makepyfile(test_pure=PYTHON_SUITE)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    pytester.makepyfile(test_pure=PYTHON_SUITE.replace('"slow" in os.environ.get("PLANT", "")', "True"))
    git(root, "commit", "-qam", "head: normalize does more")
    result = pytester.runpytest_subprocess(*ARGS, "--gpuperf-json=out/results.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*why (profile vs ref HEAD~1 (*), time per call by Python function):"])
    diff = json.loads((root / "diffs.json").read_text())["test_pipeline"]["diff"]
    assert diff["has_base"] and diff["why"][0] == ["test_pure:normalize", "slower", "cause"]
    for side in ("head_trace", "base_trace"):  # the statistics of each side's pass, for python -m pstats
        assert diff[side].endswith(".pstats") and Path(diff[side]).exists()
