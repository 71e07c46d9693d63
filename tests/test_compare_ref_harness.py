"""Every compare-ref worker runs the head's pytest-gpuperf and only the user's code of its checkout."""

from __future__ import annotations

import json

import pytest

import pytest_gpuperf
from tests.test_compare_ref import ARGS, make_repo, worktrees

pytestmark = pytest.mark.slow

# The user's code; VALUE differs between the commits.
WORKLOAD = """
VALUE = {value}

def spin():
    return sum(i * i for i in range(20000))

def harness_file():
    import pytest_gpuperf
    return pytest_gpuperf.__file__
"""

# The processes a test starts (a spawn child, as DDP ranks are; a new interpreter elsewhere)
# import the pytest_gpuperf of the process that measures, and its checkout's workload.
CHILDREN_AND_A_METRIC = """
import multiprocessing
import subprocess
import sys

import workload


def test_spin(gpu_bench, tmp_path):
    import pytest_gpuperf

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(workload.harness_file) == pytest_gpuperf.__file__
    code = "import pytest_gpuperf, workload; print(pytest_gpuperf.__file__, workload.VALUE)"
    child = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert child.stdout.split() == [pytest_gpuperf.__file__, str(workload.VALUE)], child.stderr
    gpu_bench(workload.spin)
    gpu_bench.metric("workload_value", workload.VALUE)
"""

# A copy of the plugin in the base commit that must never run; ``pythonpath`` puts the
# checkout in front of sys.path during the worker's start-up (pytest's python_path plugin).
INCOMPATIBLE_COPY = {
    "pytest_gpuperf/__init__.py": 'raise ImportError("the base commit\'s own pytest_gpuperf was imported")\n',
    # and warnings are errors, as in many projects: the worker's start-up must raise none
    "pytest.ini": "[pytest]\npythonpath = .\nfilterwarnings = error\n",
}


def test_the_base_is_measured_by_the_heads_harness_with_its_own_user_code(pytester: pytest.Pytester) -> None:
    root = make_repo(
        pytester, head_work=20000,
        base_files={**INCOMPATIBLE_COPY, "test_perf.py": CHILDREN_AND_A_METRIC,
                    "workload.py": WORKLOAD.format(value=1.0)},
        head_files={"pytest_gpuperf/__init__.py": None, "test_perf.py": CHILDREN_AND_A_METRIC,
                    "workload.py": WORKLOAD.format(value=2.0)},
    )  # fmt: skip
    result = pytester.runpytest_subprocess(*ARGS, "--gpuperf-confirm-pairs=0", "--gpuperf-json=results.json")
    assert result.ret in (0, 1), result.stdout.str()  # the time verdict itself is not what this test is about
    comparisons = {c["metric"]: c for c in json.loads((root / "results.json").read_text())["results"][0]["comparisons"]}
    time_result = comparisons["time.p50"]
    assert time_result["baseline"] is not None, time_result["note"]  # the base side ran: nothing imported its copy
    value = comparisons["metric.workload_value"]
    assert (value["baseline"], value["current"]) == (1.0, 2.0), value  # the base's workload.py, the head's
    assert worktrees(root) == 1


def test_a_worker_whose_harness_differs_from_the_heads_stops_the_run(pytester: pytest.Pytester) -> None:
    # the base's conftest changes the version in the worker: the check reads what the worker runs
    root = make_repo(
        pytester, head_work=20000,
        base_files={"conftest.py": "import pytest_gpuperf\n\npytest_gpuperf.__version__ = '0.0.0+base'\n"},
        head_files={"conftest.py": None},
    )  # fmt: skip
    result = pytester.runpytest_subprocess(*ARGS, "--gpuperf-confirm-pairs=0", timeout=120)
    # a base that cannot start: the run stops with one message and a usage error, never "regression" (1)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stdout.fnmatch_lines([
        f"*the worker at HEAD~1 runs pytest-gpuperf 0.0.0+base from *, the head {pytest_gpuperf.__version__} "
        "from *: both sides must be measured by one harness*",
    ])  # fmt: skip
    assert worktrees(root) == 1
