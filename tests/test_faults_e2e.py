"""A user's project with corrupted baselines, odd test ids, failing benchmarks and an interrupted update
loses no baseline data, and every error names its cause and file (issue 7, end to end)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from perf_project import SHORT as FAST

SIMPLE = """
import torch

A = torch.randn(32, 32)

def test_mm(gpu_bench):
    gpu_bench(torch.mm, A, A)
"""


def _baseline(project: Path) -> Path:
    (path,) = (project / "baselines").rglob("*.json")
    return path


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "*baselines*test_simple.py.json*"),
        (b'{"schema_version": 2, "entr', "*baselines*test_simple.py.json*"),
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", "*baselines*test_simple.py.json*"),
        (
            b'{"schema_version": 2, "device_class": 7, "module": "test_simple.py", "entries": []}',
            "*baselines*test_simple.py.json*$.*",
        ),
        (
            b'{"schema_version": 999, "device_class": "x", "module": "test_simple.py", "entries": {}}',
            "*baselines*test_simple.py.json*newer*",
        ),
    ],
    ids=["empty", "truncated", "binary", "wrong-types", "future-version"],
)
def test_corrupt_baseline_is_named_and_left_untouched(pytester: pytest.Pytester, content: bytes, expected: str) -> None:
    from pytest_gpuperf.baseline.naming import device_class_dir
    from pytest_gpuperf.measure.env import cpu_model, device_class_for, expected_cpu_kernels

    pytester.makepyfile(test_simple=SIMPLE)
    # the file where this machine's run looks for the module's entries (written directly: a
    # measured first baseline could be refused as implausible on a very busy machine)
    folder = device_class_dir(device_class_for("cpu", cpu_model(), expected_cpu_kernels()))
    path = pytester.path / "baselines" / folder / "test_simple.py.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)

    for args in (["--gpuperf"], ["--gpuperf", "--gpuperf-update-baseline"]):
        result = pytester.runpytest_subprocess(*args, *FAST)
        assert result.ret == 1, result.stdout.str()
        result.stdout.fnmatch_lines([expected])
        out = result.stdout.str()
        assert "INTERNALERROR" not in out and "Traceback" not in out
        assert path.read_bytes() == content  # a team's record is never replaced by a run


def test_odd_test_ids_stay_inside_the_baselines_folder(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_odd="""
        import pytest

        IDS = ["a/../../escape", "back\\\\slash", "ünïcødé-✓", "x" * 300, "..", "/abs/path"]

        @pytest.mark.parametrize("p", IDS, ids=IDS)
        def test_odd(gpu_bench, p):
            gpu_bench(lambda: None)
        """
    )
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *FAST)
    result.assert_outcomes(passed=6)
    root = (pytester.path / "baselines").resolve()
    files = [p.resolve() for p in root.rglob("*") if p.is_file() and p.suffix == ".json"]
    assert files and all(root in p.parents for p in files)
    entries = json.loads(files[0].read_text())["entries"]
    assert len(entries) == 6
    assert not (pytester.path.parent / "escape").exists()


def test_failing_benchmarks_write_nothing_and_later_tests_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_fail="""
        import math
        import torch

        def test_raises(gpu_bench):
            def boom():
                raise ValueError("bad kernel arguments")
            gpu_bench(boom)

        def test_assert_after_measure(gpu_bench):
            gpu_bench(lambda: None)
            assert False, "correctness check failed"

        def test_ok(gpu_bench):
            gpu_bench(torch.add, torch.ones(4), 1)
        """
    )
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *FAST)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*ValueError: bad kernel arguments*", "*correctness check failed*"])
    entries = json.loads(_baseline(pytester.path).read_text())["entries"]
    assert list(entries) == ["test_fail.py::test_ok::default"]


def test_interrupted_update_leaves_complete_files(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_many="""
        import time
        import pytest

        @pytest.mark.parametrize("n", range(40))
        def test_n(gpu_bench, n):
            gpu_bench(time.sleep, 0.0005)
        """
    )
    first = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *FAST, "-k", "test_n[0]")
    first.assert_outcomes(passed=1)
    path = _baseline(pytester.path)
    before = json.loads(path.read_text())

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--gpuperf", "--gpuperf-update-baseline", *FAST],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    time.sleep(6)  # some entries written, others in flight
    proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    after = json.loads(path.read_text())  # still a complete, valid document
    assert set(before["entries"]) <= set(after["entries"])
    strays = [p.name for p in path.parent.iterdir() if p.name not in {path.name} and not p.name.endswith(".lock")]
    assert strays == []
    # the store still takes updates after the interruption
    rerun = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *FAST, "-k", "test_n[0]")
    rerun.assert_outcomes(passed=1)
    assert json.loads(path.read_text())["entries"]
