"""pytest-benchmark's ``benchmark`` fixture under ``--gpuperf``, through real pytest runs (issue 22)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

FAST = ["--gpuperf-min-time=0.05", "--gpuperf-max-time=0.2", "-p", "no:cacheprovider"]

API_TESTS = """
import gc
import pytest
import torch

A = torch.randn(48, 48)
SEEN = {"setup": 0, "teardown": 0, "gc_on": set()}

def test_call_returns_result(benchmark):
    result = benchmark(torch.mm, A, A)
    assert torch.equal(result, A @ A)
    assert benchmark.name == "test_call_returns_result"
    assert benchmark.fullname.endswith("::test_call_returns_result")
    benchmark.extra_info["answer"] = 42

@pytest.mark.benchmark(group="sorting")
@pytest.mark.parametrize("n", [300])
def test_pedantic_setup_each_round(benchmark, n):
    def setup():
        SEEN["setup"] += 1
        return (list(range(n, 0, -1)),), {}

    def target(values):
        assert values[0] == n, "a round got the arguments another round used"
        values.sort()
        return values[0]

    def teardown(values):
        SEEN["teardown"] += 1

    assert benchmark.pedantic(target, setup=setup, teardown=teardown, rounds=7) == 1
    assert SEEN["setup"] == SEEN["teardown"] > 7

def test_pedantic_iterations(benchmark):
    assert benchmark.pedantic(sum, args=([1, 2, 3],), rounds=6, iterations=3, warmup_rounds=2) == 6

@pytest.mark.benchmark(disable_gc=True)
def test_gc_paused(benchmark):
    benchmark(lambda: SEEN["gc_on"].add(gc.isenabled()))
    assert False in SEEN["gc_on"] and gc.isenabled()  # the returned call runs after, as pytest-benchmark's

def test_both_fixtures(benchmark, gpu_bench):
    gpu_bench(torch.mm, A, A)
    benchmark(torch.mm, A, A)
    assert [m.name for m in gpu_bench.measurements] == ["default", "benchmark"]

def test_twice(benchmark):
    from pytest_benchmark.fixture import FixtureAlreadyUsed

    benchmark(abs, -1)
    with pytest.raises(FixtureAlreadyUsed, match="Previously it was used in benchmark\\\\(...\\\\) mode"):
        benchmark.pedantic(abs, args=(-1,))

@pytest.mark.parametrize("kwargs, error, message", [
    (dict(rounds=0), ValueError, "Must have positive int for `rounds`."),
    (dict(iterations=0), ValueError, "Must have positive int for `iterations`."),
    (dict(warmup_rounds=-1), ValueError, "Must have positive int for `warmup_rounds`."),
    (dict(iterations=2, setup=lambda: None), ValueError, "Can't use more than 1 `iterations` with a `setup` function."),
    (dict(args=(1,), setup=lambda: ((2,), {})), TypeError, "Can't use `args` or `kwargs` if `setup` returns"),
])
def test_pedantic_checks(benchmark, kwargs, error, message):
    with pytest.raises(error, match=message.replace("(", "\\\\(").replace(")", "\\\\)")):
        benchmark.pedantic(abs, **kwargs)
    assert benchmark.has_error

def test_never_called(benchmark):
    pass
"""


def _entries(path: Path) -> dict[str, dict[str, Any]]:
    document = json.loads(path.read_text())
    assert document["version"] and "machine_info" in document and "commit_info" in document
    return {entry["fullname"]: entry for entry in document["benchmarks"]}


@pytest.fixture
def api(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_api=API_TESTS)
    pytester.makeconftest("import torch\ntorch.set_num_threads(1)\n")
    pytester.makeini("[pytest]\naddopts = --strict-markers\n")
    return pytester


def test_api_under_gpuperf(api: pytest.Pytester) -> None:
    result = api.runpytest_subprocess("--gpuperf", "--benchmark-json=bench.json", *FAST)
    result.assert_outcomes(passed=12, warnings=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*the benchmark fixture measures through pytest-gpuperf*",
        "*PytestBenchmarkWarning: Benchmark fixture was not used at all in this test!*",
        "*gpuperf (baseline)*",
        "*test_call_returns_result*", "*benchmark*new*",
    ])  # fmt: skip
    assert "Name (time in" not in out  # pytest-benchmark's own table
    entries = _entries(api.path / "bench.json")
    call = entries["test_api.py::test_call_returns_result"]
    assert call["name"] == "test_call_returns_result"
    assert call["extra_info"]["answer"] == 42 and call["extra_info"]["gpuperf_verdict"] == "new"
    pedantic = entries["test_api.py::test_pedantic_setup_each_round[300]"]
    assert pedantic["group"] == "sorting" and pedantic["param"] == "300" and pedantic["params"] == {"n": 300}
    assert (pedantic["stats"]["rounds"], pedantic["stats"]["iterations"]) == (7, 1)
    iterations = entries["test_api.py::test_pedantic_iterations"]
    # six rounds, each a block of whole iterations of 3 long enough for the timer (runner.py)
    assert iterations["stats"]["rounds"] == 6 and iterations["stats"]["iterations"] % 3 == 0
    # gpu_bench's default measurement keeps the test's name; the benchmark's gets its own
    assert {"test_api.py::test_both_fixtures", "test_api.py::test_both_fixtures::benchmark"} <= set(entries)
    assert "test_api.py::test_twice" in entries  # its first use; the second raised
    assert not any("test_pedantic_checks" in name or "test_never_called" in name for name in entries)


def test_without_gpuperf_pytest_benchmark_is_untouched(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_untouched="""
        from pytest_benchmark.fixture import BenchmarkFixture

        def test_theirs(benchmark):
            assert type(benchmark) is BenchmarkFixture
            assert benchmark(sum, [1, 2]) == 3
    """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--benchmark-json=theirs.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*Name (time in*"])
    assert "gpuperf (" not in result.stdout.str()
    (entry,) = json.loads((pytester.path / "theirs.json").read_text())["benchmarks"]
    assert "gpuperf_verdict" not in entry["extra_info"]


SMOKE_TESTS = """
import sys
import pytest

CALLS = []

@pytest.mark.benchmark(group="g", min_rounds=50)
def test_once(benchmark):
    assert "pytest_benchmark.plugin" not in sys.modules
    assert benchmark(lambda x: CALLS.append(x) or x * 2, 21) == 42
    assert CALLS == [21]

def test_pedantic_once(benchmark):
    made = []
    result = benchmark.pedantic(len, setup=lambda: made.append(1) or (("abc",), {}), rounds=100)
    assert (result, made) == (3, [1])
"""


def test_smoke_mode_without_pytest_benchmark(pytester: pytest.Pytester) -> None:
    """``-p no:benchmark`` keeps pytest-benchmark from loading at all: its options are unknown, as uninstalled."""
    pytester.makepyfile(test_smoke=SMOKE_TESTS)
    pytester.makeini("[pytest]\naddopts = --strict-markers\n")
    result = pytester.runpytest_subprocess("-p", "no:benchmark", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert not (pytester.path / "baselines").exists()
    unknown = pytester.runpytest_subprocess("-p", "no:benchmark", "-p", "no:cacheprovider", "--benchmark-only")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR


REGRESSION_TEST = """
import os
import torch

REPS = int(os.environ.get("DEMO_REPS", "4"))
A = torch.randn(192, 192) / 14

def work():
    x = A
    for _ in range(REPS):
        x = torch.tanh(x @ A)
    return x

def test_matmul(benchmark):
    assert benchmark(work).shape == (192, 192)
"""

# As tests/test_core_loop.py: a generous threshold for a shared CI machine, the planted tripling far above it,
# judged as measured on a busy machine too (gpuperf_busy_policy).
GATE = ["--gpuperf-threshold=0.25", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.6", "-p", "no:cacheprovider",
        "--gpuperf-busy-policy=judge"]  # fmt: skip


def test_planted_regression_in_a_benchmark_test_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_perf=REGRESSION_TEST)
    pytester.makeconftest("import torch\ntorch.set_num_threads(1)\n")
    pytester.makeini("[pytest]\n")
    pytester.runpytest_subprocess("--gpuperf-update-baseline", *GATE).assert_outcomes(passed=1)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    assert "test_perf.py::test_matmul::benchmark" in json.loads(path.read_text())["entries"]
    pytester.runpytest_subprocess("--gpuperf", *GATE).assert_outcomes(passed=1)
    monkeypatch.setenv("DEMO_REPS", "12")
    slower = pytester.runpytest_subprocess("--gpuperf", *GATE)
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines(["*test_matmul*regression*"])


def test_benchmark_json_under_xdist_keeps_group_and_extra_info(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_workers="""
        import pytest

        @pytest.mark.benchmark(group="g")
        @pytest.mark.parametrize("n", [1, 2])
        def test_sum(benchmark, n):
            benchmark.extra_info["n"] = n
            benchmark(sum, range(n))
    """
    )
    result = pytester.runpytest_subprocess("--gpuperf", "-n", "2", "--benchmark-json=bench.json", *FAST)
    result.assert_outcomes(passed=2)
    entries = _entries(pytester.path / "bench.json")
    assert {name: (e["group"], e["extra_info"]["n"]) for name, e in entries.items()} == {
        "test_workers.py::test_sum[1]": ("g", 1),
        "test_workers.py::test_sum[2]": ("g", 2),
    }


def test_the_fixtures_names_and_extra_info_travel_on_the_measurement_to_gpuperf_report(
    pytester: pytest.Pytester,
) -> None:
    """--benchmark-json and ``gpuperf report --format benchmark-json`` of the results file write the same entry."""
    pytester.makepyfile(
        test_late="""
        import pytest

        @pytest.mark.benchmark(group="g")
        @pytest.mark.parametrize("n", [3])
        def test_sum(benchmark, n):
            benchmark(sum, range(n))
            benchmark.extra_info["n"] = n  # after the call, as pytest-benchmark allows
            benchmark.extra_info["odd"] = float("nan")  # no JSON number: written as its repr
    """
    )
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-json=r.json", "--benchmark-json=b.json", *FAST)
    result.assert_outcomes(passed=1)
    from pytest_gpuperf.cli import main

    again = pytester.path / "again.json"
    assert main(["report", str(pytester.path / "r.json"), "--format", "benchmark-json", "-o", str(again)]) == 0
    written, rebuilt = _entries(pytester.path / "b.json"), _entries(again)
    entry = rebuilt["test_late.py::test_sum[3]"]
    assert (entry["name"], entry["group"], entry["param"], entry["params"]) == ("test_sum[3]", "g", "3", {"n": 3})
    assert (entry["extra_info"]["n"], entry["extra_info"]["odd"], entry["extra_info"]["gpuperf_verdict"]) == (
        3, "NaN", "new")  # fmt: skip
    assert written == rebuilt


COMPARED_TEST = """
def work():
    return sum(range({work}))

def test_work(benchmark):
    assert benchmark(work) == sum(range({work}))
"""


def test_compare_ref_measures_the_benchmark_fixture_on_both_sides(pytester: pytest.Pytester) -> None:
    """The base worker takes the fixture over too: without it, its side would have no measurement."""
    root = pytester.path

    def commit(work: int) -> None:
        pytester.makepyfile(test_compared=COMPARED_TEST.format(work=work))
        for args in (("add", "-A"), ("commit", "-qm", f"work {work}")):
            subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)

    for args in (("init", "-q"), ("config", "user.email", "t@example.com"), ("config", "user.name", "t")):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    commit(20000)
    commit(80000)  # four times the work, as tests/test_compare_ref.py plants it
    result = pytester.runpytest_subprocess(
        "--gpuperf-compare-ref=HEAD~1", "--gpuperf-confirm-pairs=3", "--gpuperf-threshold=0.25",
        "--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.6", "-p", "no:cacheprovider",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*compared with HEAD~1*", "*test_compared.py::test_work*", "*benchmark*regression*"])


LAZY = """
def numbers(n):
    for i in range(n):
        yield i * i

def test_generator_creation(benchmark):
    gen = benchmark(numbers, 100)
    assert sum(gen) == 328350  # pytest-benchmark returns one more call's result: a fresh generator

def test_map_creation(benchmark):
    benchmark.pedantic(map, args=(abs, [-1, 2]), rounds=20, iterations=5)

def test_gpu_bench_still_refuses(gpu_bench):
    gpu_bench(numbers, 100)
"""


def test_a_benchmark_call_returning_a_lazy_result_is_timed_as_pytest_benchmark_times_it(
    pytester: pytest.Pytester,
) -> None:
    # A pytest-benchmark suite may time the creation of a generator or iterator (pydantic-core's
    # test_generator_python does): under --gpuperf it runs unchanged, with a note saying what was
    # timed. gpu_bench, which measures work, still refuses one.
    pytester.makepyfile(test_lazy=LAZY)
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-json=out.json", *FAST)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_gpu_bench_still_refuses*returned a generator: its body never runs*"])
    notes = {
        r["key"].split("::")[1]: [n["text"] for n in r["measurement"]["notes"]]
        for r in json.loads((pytester.path / "out.json").read_text())["results"]
    }
    assert any(
        "returns a generator: as with pytest-benchmark, only the call" in n for n in notes["test_generator_creation"]
    )
    assert any("returns an iterator (map)" in n for n in notes["test_map_creation"])


# -- pytest-codspeed installed beside it (a dev dependency, as in projects that run both) ------------------

CODSPEED_SUITE = """
import os

WORK = int(os.environ.get("WORK", "3000"))

def test_sum(benchmark):
    benchmark(lambda: sum(range(WORK)))
"""


@pytest.mark.parametrize(("args", "env", "named"), [
    (["--codspeed", "--gpuperf"], {}, "pytest-codspeed (--codspeed)"),
    (["--gpuperf"], {"CODSPEED_ENV": "1"}, "pytest-codspeed (CODSPEED_ENV (set by CodSpeed's runner))"),
    (["--codspeed", "--gpuperf-update-baseline"], {}, "pytest-codspeed (--codspeed)"),
])  # fmt: skip
def test_gpuperf_with_codspeed_turned_on_is_a_usage_error_naming_both(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], named: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_bench=CODSPEED_SUITE)
    result = pytester.runpytest_subprocess(*args, *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*pytest-gpuperf (--gpuperf) and {named} both measure the benchmark fixture*"
                                 "pytest --gpuperf*pytest --codspeed without --gpuperf*"])  # fmt: skip
    result.stdout.no_fnmatch_line("*passed*")


def test_gpuperf_gates_benchmark_tests_with_codspeed_installed_and_off(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CODSPEED_ENV", raising=False)
    pytester.makepyfile(test_bench=CODSPEED_SUITE)
    written = pytester.runpytest_subprocess("--gpuperf-update-baseline", "--gpuperf-busy-policy=judge", *FAST)
    written.assert_outcomes(passed=1)
    monkeypatch.setenv("WORK", "300000")  # a hundred times the work: the gate must see it
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-busy-policy=judge", *FAST)
    result.stdout.fnmatch_lines(["*the benchmark fixture measures through pytest-gpuperf*"])
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*performance regression in test_bench.py::test_sum::benchmark*"])
