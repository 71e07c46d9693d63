"""A project's own conftest options reach the workers: a fresh re-measure collects the same test ids."""

from __future__ import annotations

import subprocess

import pytest

CONFTEST = """
import torch
torch.set_num_threads(1)

def pytest_addoption(parser):
    parser.addoption("--variant", default="small", help="which size to measure")
    parser.addoption("--fast-path", action="store_true", help="a flag")
    parser.addoption("--tag", action="append", default=[], help="repeatable")

def pytest_generate_tests(metafunc):
    if "variant" in metafunc.fixturenames:
        metafunc.parametrize("variant", [metafunc.config.getoption("variant")])
"""

PERF_TEST = """
import torch

def test_sized(gpu_bench, variant, request):
    assert request.config.getoption("fast_path") and request.config.getoption("tag") == ["a", "b c"]
    n = {"small": 32, "large": 96}[variant]
    a = torch.randn(n, n)
    gpu_bench(torch.mm, a, a)
"""

ARGS = ["--variant=large", "--fast-path", "--tag=a", "--tag=b c", "-p", "no:cacheprovider",
        "--gpuperf-min-time=0.05", "--gpuperf-max-time=0.2"]  # fmt: skip


def test_the_base_worker_collects_the_same_test_ids_with_the_conftest_options(pytester: pytest.Pytester) -> None:
    root = pytester.path
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_perf=PERF_TEST)
    pytester.makeini("[pytest]\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    run = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-compare-ref=HEAD", "--gpuperf-threshold=0.5", *ARGS)
    run.assert_outcomes(passed=1)
    # without --variant=large the base worker would parametrize test_sized[small]: [large] reads "new"
    run.stdout.fnmatch_lines(["*0 regressions, 0 improvements, 1 unchanged, 0 new*"])


def test_only_changed_options_are_repeated(pytester: pytest.Pytester) -> None:
    from pytest_gpuperf.plugin import conftest_options

    pytester.makeconftest(CONFTEST)
    config = pytester.parseconfigure("--variant=large", "--tag=x")
    assert conftest_options.worker_args(config) == ("--variant=large", "--tag=x")
    plain = pytester.parseconfigure()
    assert conftest_options.worker_args(plain) == ()
