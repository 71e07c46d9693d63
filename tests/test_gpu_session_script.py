"""benchmarks/gpu_session.sh on a machine without CUDA: its GPU steps skip cleanly, one line per step."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_session.sh"
STEPS = ["machine", "cuda_tests", "fidelity", "why_cuda", "examples_record", "examples_rerun", "examples_planted",
         "full_suite"]  # fmt: skip

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the run without CUDA")


def session(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT)], cwd=SCRIPT.parents[1], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, **env})  # fmt: skip


def summary(out: str) -> dict[str, str]:
    lines = out.split("=== summary", 1)[1].splitlines()[1:]
    return {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines}


def test_without_cuda_gpu_steps_skip_and_the_rest_pass(tmp_path: Path) -> None:
    done = session(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = summary(done.stdout)
    assert list(lines) == STEPS
    no_cuda = "skipped, no CUDA (torch.cuda.is_available() is False)"
    for step in ("machine", "fidelity", "examples_record", "examples_rerun", "examples_planted", "full_suite"):
        assert lines[step] == no_cuda
    assert lines["why_cuda"].startswith("ok (exit 0, ")
    assert lines["why_cuda"].endswith("): why on CUDA: skipped, torch.cuda.is_available() is False")
    assert lines["cuda_tests"].startswith("ok (exit 0, ")
    assert " skipped in " in lines["cuda_tests"]
    with tarfile.open(tmp_path / "gpu-run.tgz") as tar:
        assert {"./why_cuda.json", "./why_cuda.log", "./cuda_tests.log"} <= set(tar.getnames())


def test_a_step_past_the_budget_fails_and_says_so(tmp_path: Path) -> None:
    done = session(tmp_path, BUDGET="20", EXAMPLES="0", FULL_SUITE="0")
    assert done.returncode == 1
    lines = summary(done.stdout)
    assert lines["cuda_tests"] == "FAILED, skipped: no time left in the budget of 20s"
    assert lines["why_cuda"] == "FAILED, skipped: no time left in the budget of 20s"


def probe_wheel(folder: Path) -> None:
    """A minimal pure-Python wheel: one module, ``gpuperf_probe``."""
    folder.mkdir()
    info = "gpuperf_probe-1.0.dist-info"
    files = {
        "gpuperf_probe.py": "VALUE = 1\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: gpuperf-probe\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(folder / "gpuperf_probe-1.0-py3-none-any.whl", "w") as whl:
        for name, text in files.items():
            whl.writestr(name, text)
        whl.writestr(f"{info}/RECORD", "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"]))


def test_carried_wheels_are_installed_before_the_steps(tmp_path: Path) -> None:
    probe_wheel(tmp_path / "wheels")
    site = tmp_path / "site"
    done = session(tmp_path / "out", WHEELS=str(tmp_path / "wheels"), SITE=str(site), BUDGET="20", EXAMPLES="0",
                   FULL_SUITE="0")  # fmt: skip
    assert done.stdout.splitlines()[0] == f"wheels: 1 installed from {tmp_path / 'wheels'} into {site}"
    assert (site / "gpuperf_probe.py").read_text() == "VALUE = 1\n"
    assert "=== summary" in done.stdout
