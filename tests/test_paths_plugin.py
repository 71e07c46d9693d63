"""The example suite's planted regressions, run through the plugin in a subprocess.

Each test copies the examples into pytester's directory and runs one module with
``GPUPERF_EXAMPLES_PLANT`` set: the run must fail, and the failure must name the
path (the measurement) that regressed. The unplanted run of the same module passes,
so the failure comes from the plant and not from the set-up.
"""

from __future__ import annotations

import re
import shutil
from importlib.metadata import entry_points
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# planted regressions judged as measured on a busy machine too (gpuperf_busy_policy)
FAST = [
    "--gpuperf-warmup-time=0.02",
    "--gpuperf-min-time=0.05",
    "--gpuperf-max-time=0.3",
    "--gpuperf-busy-policy=judge",
]


def plugin_args() -> list[str]:
    """Load the plugin explicitly where its entry point is not installed."""
    active = any(e.value == "pytest_gpuperf.plugin" for e in entry_points(group="pytest11"))
    return [] if active else ["-p", "pytest_gpuperf.plugin"]


@pytest.fixture
def examples(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in (
        "conftest.py",
        "workloads.py",
        "test_compile.py",
        "test_amp.py",
        "test_checkpointing.py",
        "test_kernels.py",
    ):
        shutil.copy(EXAMPLES / name, pytester.path / name)
    # dynamo's "eager" backend: real graph breaks and recompiles without inductor's compile time
    monkeypatch.setenv("GPUPERF_EXAMPLES_COMPILE_BACKEND", "eager")
    monkeypatch.delenv("GPUPERF_EXAMPLES_PLANT", raising=False)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)


@pytest.mark.slow
def test_each_planted_regression_fails_naming_its_path(
    examples: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = ["test_compile.py", "test_checkpointing.py", "test_amp.py"]
    run(examples, *modules, "--gpuperf", *FAST).assert_outcomes(passed=3)

    monkeypatch.setenv("GPUPERF_EXAMPLES_PLANT", "graph_break,recompile,no_checkpoint,wrong_amp")
    result = run(examples, *modules, "--gpuperf", *FAST)
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*performance regression in test_compile.py::test_compiled_block::compile.steady*",
            "*graph_breaks = 1 is above its maximum 0*",
        ]
    )
    result.stdout.fnmatch_lines(["*recompiles = * is above its maximum 0*"])
    result.stdout.fnmatch_lines(
        [
            "*performance regression in test_checkpointing.py::*::checkpoint.on*",
            "*activation_saving = 0 is below its minimum 0.5*",
        ]
    )
    # a wrong autocast path fails in the helper itself, before timing (smoke mode too)
    result.stdout.fnmatch_lines(["*AmpNumericsError: amp.bf16: autocast loss/gradients differ from fp32*"])


def test_misspelt_plant_is_a_usage_error(examples: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPERF_EXAMPLES_PLANT", "graph_brake")
    result = run(examples, "test_kernels.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*GPUPERF_EXAMPLES_PLANT='graph_brake': unknown plant(s)*known: graph_break*"])


@pytest.mark.slow
def test_planted_slow_kernel_is_a_time_regression_against_the_baseline(
    examples: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    select = ["test_kernels.py::test_custom_op_bandwidth", *FAST]
    run(examples, *select, "--gpuperf-update-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("GPUPERF_EXAMPLES_PLANT", "slow_kernel")  # nine times the work
    result = run(examples, *select, "--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*performance regression in*::kernel.custom_op*"])


@pytest.mark.slow
def test_the_whole_example_suite_passes_in_smoke_mode(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPERF_EXAMPLES_PLANT", raising=False)
    for path in EXAMPLES.iterdir():
        if path.suffix == ".py":
            shutil.copy(path, pytester.path / path.name)
    result = run(pytester, "-W", "error")
    result.assert_outcomes(passed=10, skipped=2)  # CUDA graphs and Triton need a GPU


@pytest.mark.slow
def test_on_a_cpu_the_suite_gates_times_at_its_cpu_threshold_unless_the_session_sets_one(
    examples: pytest.Pytester,
) -> None:
    """A shared CPU moves the suite's steps between sessions by more than 10%: its baseline gate is 25% there.

    A threshold the session gives (here on the command line) is the user's, and wins.
    """
    select = ["test_kernels.py::test_custom_op_bandwidth", *FAST, "--gpuperf-device=cpu"]
    run(examples, *select, "--gpuperf-update-baseline").assert_outcomes(passed=1)
    gated = run(examples, *select, "--gpuperf", "--gpuperf-explain")
    told = run(examples, *select, "--gpuperf", "--gpuperf-explain", "--gpuperf-threshold=0.3")
    # the threshold the rules started from (the noise floor may raise it further)
    for result, threshold in ((gated, "25.0%"), (told, "30.0%")):
        assert re.search(rf"\[noise-floor\] threshold (raised from )?{threshold}", result.stdout.str()), result.stdout
