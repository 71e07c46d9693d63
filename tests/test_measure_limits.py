"""Enough samples within bounded time, and results that cannot be timed, through real pytest runs."""

from __future__ import annotations

import pytest

# planted regressions judged as measured on a busy machine too
TINY = [
    "--gpuperf-warmup-time=0.02",
    "--gpuperf-min-time=0.05",
    "-p",
    "no:cacheprovider",
    "--gpuperf-busy-policy=judge",
]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest("import torch\ntorch.set_num_threads(1)\n")
    pytester.makeini("[pytest]\n")
    return pytester


def test_a_slow_call_gets_six_samples_under_a_smaller_budget(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_slow="""
        import time

        def test_slow(gpu_bench):
            m = gpu_bench(time.sleep, 0.3)
            assert len(m.samples_ns) >= 6, m.samples_ns
            assert not any("fewer than" in note for note in [x.text for x in m.notes])
        """
    )
    result = project.runpytest_subprocess("--gpuperf", "--gpuperf-max-time=0.2", *TINY)
    result.assert_outcomes(passed=1)


def test_a_call_too_slow_for_six_samples_in_the_limit_gets_fewer_and_a_note(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_slower="""
        import time

        def test_slower(gpu_bench):
            m = gpu_bench(time.sleep, 0.25)
            assert 1 <= len(m.samples_ns) < 6, m.samples_ns
        """
    )
    result = project.runpytest_subprocess("--gpuperf", "--gpuperf-max-time=0.2", "--gpuperf-time-limit=1", *TINY)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test_slower*: * sample*, fewer than the 6 a verdict needs, within the 1 s time limit (--gpuperf-time-limit)"]
    )


def test_a_call_longer_than_the_budget_that_doubles_fails_and_one_too_slow_to_judge_is_not_gated(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the training-step hole scaled down: a call longer than the whole time budget once had one
    # sample and could never fail; now it gets six, and a doubling fails the test
    project.makepyfile(
        test_step="""
        import os
        import time

        def test_step(gpu_bench):
            gpu_bench(time.sleep, float(os.environ.get("STEP_S", "0.25")))
        """
    )
    gate = ["--gpuperf-max-time=0.2", *TINY]
    project.runpytest_subprocess("--gpuperf-update-baseline", *gate).assert_outcomes(passed=1)
    project.runpytest_subprocess("--gpuperf", *gate).assert_outcomes(passed=1)
    monkeypatch.setenv("STEP_S", "0.5")
    slower = project.runpytest_subprocess("--gpuperf", *gate)
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines(["*performance regression in test_step.py::test_step::default*"])
    # a time limit that fits fewer than six samples: said in the summary, never a silent pass
    short = project.runpytest_subprocess("--gpuperf", "--gpuperf-time-limit=1.5", *gate)
    short.assert_outcomes(passed=1)
    short.stdout.fnmatch_lines(["*not gated*", "*not gated: this run has * sample(s), fewer than the 6*"])
    strict = project.runpytest_subprocess("--gpuperf", "--gpuperf-time-limit=1.5", "--gpuperf-strict", *gate)
    strict.assert_outcomes(failed=1)


def test_a_hung_call_fails_its_test_at_the_marker_time_limit(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_hang="""
        import time
        import pytest

        @pytest.mark.gpuperf(time_limit=1)
        def test_hang(gpu_bench):
            gpu_bench.measure(time.sleep, args=(60,), name="forever")

        CALLS = []

        def later():
            CALLS.append(1)
            time.sleep(60 if len(CALLS) > 3 else 0.01)

        @pytest.mark.gpuperf(time_limit=1)
        def test_hang_later(gpu_bench):
            gpu_bench(later)
        """
    )
    result = project.runpytest_subprocess("--gpuperf", "--gpuperf-max-time=0.2", *TINY, timeout=60)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_hang.py::test_hang: measurement 'forever' ran past its 1 s time limit during the warm-up: "
            "a call did not return in time*--gpuperf-time-limit=SECONDS*time_limit=SECONDS*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*test_hang.py::test_hang_later: measurement 'default' ran past its 1 s time limit during the measurement*"]
    )
    assert "Traceback" not in result.stdout.str()


LAZY = """
import asyncio

def gen():
    yield 1

async def coro():
    await asyncio.sleep(0)

async def agen():
    yield 1

def test_generator(gpu_bench):
    gpu_bench(gen)

def test_coroutine(gpu_bench):
    gpu_bench(coro)

def test_async_generator(gpu_bench):
    gpu_bench(agen)
"""


@pytest.mark.parametrize("mode", [["--gpuperf", "--gpuperf-update-baseline", "--gpuperf-max-time=0.2"], []])
def test_a_generator_or_coroutine_result_fails_naming_the_test(project: pytest.Pytester, mode: list[str]) -> None:
    project.makepyfile(test_lazy=LAZY)
    result = project.runpytest_subprocess(*mode, "-W", "error", *TINY)
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_lazy.py::test_generator: measurement 'default' returned a generator: its body never runs "
            "when called; measure a function that does the work (e.g. lambda: list(gen()))",
            "*test_lazy.py::test_coroutine: measurement 'default' returned a coroutine: its body never runs*",
            "*test_lazy.py::test_async_generator: measurement 'default' returned an async generator: *",
        ],
        consecutive=False,
    )
    output = result.stdout.str() + result.stderr.str()
    assert "never awaited" not in output
    assert not (project.path / "baselines").exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "-1",
            "*test_bad.py::test_limit: @pytest.mark.gpuperf(time_limit=...) must be a positive number of seconds, "
            "got -1*",
        ),
        ("'long'", "*test_bad.py::test_limit: @pytest.mark.gpuperf(time_limit=...) must be a number, got 'long'*"),
    ],
)
def test_a_bad_marker_time_limit_fails_that_test_naming_it(pytester: pytest.Pytester, value: str, message: str) -> None:
    pytester.makepyfile(
        test_bad=f"""
        import pytest

        @pytest.mark.gpuperf(time_limit={value})
        def test_limit(gpu_bench):
            gpu_bench(lambda: None)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--gpuperf-time-limit=-1"], "",
         "*--gpuperf-time-limit must be a positive number of seconds, got -1.0*"),
        (["--gpuperf-time-limit=inf"], "",
         "*--gpuperf-time-limit must be a positive number of seconds, got inf*"),
        (["--gpuperf-time-limit=soon"], "", "*argument --gpuperf-time-limit: invalid float value: 'soon'*"),
        ([], "gpuperf_time_limit = soon", "*ini value gpuperf_time_limit = 'soon' is not valid*"),
    ],
)  # fmt: skip
def test_a_bad_time_limit_option_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, args: list[str], ini: str, message: str
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
