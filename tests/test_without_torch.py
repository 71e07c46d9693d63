"""A numpy suite measured where torch cannot be imported: torch is an optional dependency (the ``torch`` extra)."""

from __future__ import annotations

import json

import pytest
from profile_plants import DUMP_HOOK, PYTHON_SUITE

# Imported by every Python process whose path holds pytester's folder (pytester puts it on PYTHONPATH):
# the head, the zygote and the re-measure workers all run as on a machine without torch.
BLOCK_TORCH = "import sys\n\nsys.modules['torch'] = None  # 'import torch' raises ModuleNotFoundError\n"
NUMPY_SUITE = """
import numpy as np

A = np.random.default_rng(0).random((48, 48))

def test_matmul(benchmark):
    benchmark(lambda: A @ A)

def test_sum(gpu_bench):
    gpu_bench(lambda: float(np.sum(A)))

def test_torch_is_blocked():
    with __import__("pytest").raises(ImportError):
        import torch  # noqa: F401
"""
SHORT = ("-p", "no:cacheprovider", "--gpuperf-warmup-time=0.01", "--gpuperf-min-time=0.03",
         "--gpuperf-max-time=0.2", "--gpuperf-busy-policy=judge")  # fmt: skip


@pytest.fixture
def no_torch(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(sitecustomize=BLOCK_TORCH, test_np=NUMPY_SUITE)
    pytester.makeini("[pytest]\n")
    return pytester


@pytest.mark.slow
def test_a_numpy_suite_writes_and_gates_baselines_without_torch(no_torch: pytest.Pytester) -> None:
    update = no_torch.runpytest_subprocess("--gpuperf-update-baseline", *SHORT, timeout=300)
    update.assert_outcomes(passed=3)
    out = update.stdout.str()
    assert "ModuleNotFoundError" not in out and "needs torch" not in out  # the suite does not use torch: no word of it
    gate = no_torch.runpytest_subprocess("--gpuperf", "--gpuperf-threshold=0.5", "--gpuperf-json=r.json", *SHORT,
                                         timeout=300)  # fmt: skip
    assert gate.ret in (0, 1), gate.stdout.str()  # the verdicts themselves are not what this test is about
    results = json.loads((no_torch.path / "r.json").read_text())
    assert {r["measurement"]["test_id"] for r in results["results"]} == {"test_np.py::test_matmul",
                                                                         "test_np.py::test_sum"}  # fmt: skip
    assert all(r["comparisons"][0]["baseline"] is not None for r in results["results"])
    assert results["environment"]["torch"] is None


def test_what_needs_torch_says_so_and_how_to_install_it(no_torch: pytest.Pytester) -> None:
    result = no_torch.runpytest_subprocess("--gpuperf", "--gpuperf-device=cuda", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-device=cuda needs torch, which is not installed: pip install*[torch]*"])
    no_torch.makepyfile(test_np="from pytest_gpuperf.paths import amp\n\ndef test_amp():\n    pass\n")
    paths = no_torch.runpytest_subprocess("-p", "no:cacheprovider")
    paths.stdout.fnmatch_lines(["*pytest_gpuperf.paths needs torch, which is not installed*[torch]*"])


@pytest.mark.slow
def test_a_pure_python_regression_is_explained_by_function_without_torch(
    no_torch: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No torch: the baseline entry keeps a profile by Python function, and a planted slowdown in one function is
    named by the why, in the failure message and the explanation's first row."""
    no_torch.makepyfile(test_pure=PYTHON_SUITE)
    no_torch.makeconftest(DUMP_HOOK)
    args = ("-k", "pipeline", "--gpuperf-remeasure=0", "--gpuperf-threshold=0.25", *SHORT)
    no_torch.runpytest_subprocess("--gpuperf-update-baseline", *args, timeout=300).assert_outcomes(passed=1)
    (path,) = (no_torch.path / "baselines").rglob("*.json")
    stored = json.loads(path.read_text())["entries"]["test_pure.py::test_pipeline::default"]["profile"]
    assert stored["torch"] is None and {op["kind"] for op in stored["ops"]} == {"function"}
    monkeypatch.setenv("PLANT", "slow")
    gate = no_torch.runpytest_subprocess("--gpuperf", *args, timeout=300)
    gate.assert_outcomes(failed=1)
    gate.stdout.fnmatch_lines(["*why (profile vs baseline*, time per call by Python function):",
                               "*+* test_pure:normalize (slower per call)"])  # fmt: skip
    why = json.loads((no_torch.path / "diffs.json").read_text())["test_pipeline"]["diff"]["why"]
    assert why[0] == ["test_pure:normalize", "slower", "cause"]
