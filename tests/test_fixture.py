"""The ``gpu_bench`` fixture object (plugin/fixture.py): what a perf test calls, refused by name where it is wrong."""

from __future__ import annotations

import pytest
from perf_project import SHORT

METRICS = """
def work():
    return sum(range(100))

def test_tolerance_text(gpu_bench):
    gpu_bench(work)
    gpu_bench.metric("acc", 0.9, tolerance="0.1")

def test_minimum_text(gpu_bench):
    gpu_bench(work)
    gpu_bench.metric("acc", 0.9, minimum="0.5")

def test_long_name(gpu_bench):
    gpu_bench(work)
    gpu_bench.metric("m" * 222, 1.0)

def test_long_unit(gpu_bench):
    gpu_bench(work)
    gpu_bench.metric("acc", 1.0, unit="u" * 65)

def test_fine(gpu_bench):
    gpu_bench(work)
    gpu_bench.metric("acc", 0.9, tolerance=0.1, minimum=0.5, unit="%")
"""


@pytest.mark.parametrize("mode", ["--gpuperf-update-baseline", "--gpuperf"])
def test_a_metric_no_verdict_or_store_could_use_fails_its_test_naming_the_argument(
    pytester: pytest.Pytester, mode: str
) -> None:
    pytester.makepyfile(test_metrics=METRICS)
    result = pytester.runpytest_subprocess(mode, *SHORT, "--gpuperf-threshold=5")
    result.assert_outcomes(passed=1, failed=4)
    result.stdout.fnmatch_lines(
        [
            "*test_tolerance_text: metric 'acc' of measurement 'default': tolerance='0.1' is not a number*",
            "*test_minimum_text: metric 'acc' of measurement 'default': minimum='0.5' is not a number*",
            "*test_long_name: metric 'mmm*' of measurement 'default': name is 222 characters long; a history "
            "store keeps at most 193*",
            "*test_long_unit: metric 'acc' of measurement 'default': unit is 65 characters long; a history store "
            "keeps at most 64*",
        ],
        consecutive=False,
    )
    output = result.stdout.str()
    assert "TypeError" not in output and "verdict/rules.py" not in output
