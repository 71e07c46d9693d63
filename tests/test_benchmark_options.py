"""pytest-benchmark's options and marker under ``--gpuperf``: honoured, mapped, or named as ignored (issue 22)."""

from __future__ import annotations

import pytest

from pytest_gpuperf import config as cfg
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.plugin.benchmark_options import MarkerChoice

FAST = ["--gpuperf-min-time=0.05", "--gpuperf-max-time=0.2", "-p", "no:cacheprovider"]


# -- resolve: the one place the marker meets the session ----------------------------------


def test_resolve_maps_benchmark_marker_options() -> None:
    session = cfg.GpuperfConfig(enabled=True)
    settings = cfg.resolve(session, benchmark=cfg.BenchmarkOptions(max_time=0.05, min_rounds=9, precision=0.04))
    m = settings.measure
    assert (m.max_time_s, m.min_samples, m.target_precision) == (0.05, 9, 0.04)
    assert m.min_time_s <= m.max_time_s  # a shorter max_time shortens the least time too


def test_resolve_gpuperf_marker_beats_benchmark_marker_and_min_rounds_never_lowers() -> None:
    session = cfg.GpuperfConfig(enabled=True)
    settings = cfg.resolve(session, cfg.MarkerOptions(max_time=0.4), benchmark=cfg.BenchmarkOptions(
        max_time=0.3, min_rounds=2))  # fmt: skip
    assert settings.measure.max_time_s == 0.4
    assert settings.measure.min_samples == cfg.DEFAULT_MIN_SAMPLES


def test_resolve_names_the_benchmark_marker_in_its_errors() -> None:
    expected = r"t\.py::t: @pytest\.mark\.benchmark\(precision=2\.0\): --gpuperf-target-precision must be in"
    with pytest.raises(ConfigError, match=expected):
        cfg.resolve(cfg.GpuperfConfig(enabled=True), benchmark=cfg.BenchmarkOptions(precision=2.0), test_id="t.py::t")


# -- the marker ---------------------------------------------------------------------------


def test_marker_unknown_keyword_names_the_test_and_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"t\.py::t: unknown @pytest\.mark\.benchmark keyword\(s\) rounds; known: "):
        MarkerChoice.from_kwargs({"rounds": 3}, test_id="t.py::t")


@pytest.mark.parametrize("kwargs", [{"max_time": "1"}, {"max_time": 0}, {"min_rounds": 1.5}, {"precision": True}])
def test_marker_bad_values_name_the_keyword(kwargs: dict[str, object]) -> None:
    (name,) = kwargs
    with pytest.raises(ConfigError, match=rf"benchmark\({name}=\.\.\.\)"):
        MarkerChoice.from_kwargs(kwargs, test_id="t.py::t")


def test_marker_ignored_keywords_get_one_note_each() -> None:
    choice = MarkerChoice.from_kwargs({"timer": "clock", "min_time": 0.1, "warmup": True, "group": "g"}, test_id="t")
    assert [note.split(")", 1)[0] for note in choice.notes] == [
        "@pytest.mark.benchmark(min_time=0.1",
        "@pytest.mark.benchmark(timer='clock'",
    ]
    assert "cannot be CUDA-correct" in choice.notes[1]
    assert choice.group == "g"
    assert MarkerChoice.from_kwargs({"warmup": False}, test_id="t").notes  # no warm-up is not on offer


# -- through pytest -----------------------------------------------------------------------

SETTINGS_TESTS = """
import os
import pytest

def expected(name):
    return float(os.environ[name])

def test_session(gpu_bench):
    m = gpu_bench.settings.measure
    assert (m.max_time_s, m.min_samples, m.target_precision) == (
        expected("MAX_TIME"), expected("MIN_SAMPLES"), expected("PRECISION"))

@pytest.mark.benchmark(max_time=0.15, min_rounds=11, timer=None)
def test_marker(benchmark, gpu_bench):
    assert (gpu_bench.settings.measure.max_time_s, gpu_bench.settings.measure.min_samples) == (0.15, 11)
    benchmark(abs, -1)
"""


def test_options_map_onto_settings_and_the_rest_warn(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_settings=SETTINGS_TESTS)
    monkeypatch.setenv("MAX_TIME", "0.3")
    monkeypatch.setenv("MIN_SAMPLES", "8")
    monkeypatch.setenv("PRECISION", "0.04")
    result = pytester.runpytest_subprocess(
        "--gpuperf", "-p", "no:cacheprovider", "--benchmark-max-time=0.3", "--benchmark-min-rounds", "8",
        "--benchmark-precision=0.04", "--benchmark-min-time=0.001", "--benchmark-compare-fail=mean:5%",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "gpuperf: --benchmark-min-time is ignored under --gpuperf*",
        "gpuperf: --benchmark-compare-fail is ignored under --gpuperf: the gate fails*",
        "*test_marker::benchmark: @pytest.mark.benchmark(timer=None) ignored: a custom timer cannot be*CUDA*",
    ])  # fmt: skip
    # pytest-gpuperf's own option wins over pytest-benchmark's
    monkeypatch.setenv("MAX_TIME", "0.25")
    pytester.runpytest_subprocess(
        "--gpuperf", "-p", "no:cacheprovider", "--benchmark-max-time=0.3", "--gpuperf-max-time=0.25",
        "--benchmark-min-rounds=8", "--benchmark-precision=0.04",
    ).assert_outcomes(passed=2)  # fmt: skip


SELECTION_TESTS = """
import os

CALLS = []

def test_plain():
    pass

def test_bench(benchmark):
    benchmark(CALLS.append, 1)
    if os.environ.get("DISABLED"):
        assert CALLS == [1]

def test_gpu(gpu_bench):
    gpu_bench(abs, -1)
"""


@pytest.fixture
def selection(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_select=SELECTION_TESTS)
    return pytester


def test_benchmark_only_skips_tests_without_a_benchmark(selection: pytest.Pytester) -> None:
    result = selection.runpytest_subprocess("--gpuperf", "--benchmark-only", "-rs", *FAST)
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*Skipping non-benchmark (--benchmark-only active).*"])


def test_benchmark_skip_skips_the_benchmarks(selection: pytest.Pytester) -> None:
    result = selection.runpytest_subprocess("--gpuperf", "--benchmark-skip", *FAST)
    result.assert_outcomes(passed=1, skipped=2)


def test_benchmark_disable_calls_once_and_measures_nothing(
    selection: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISABLED", "1")
    result = selection.runpytest_subprocess("--gpuperf", "--benchmark-disable", *FAST)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_select.py::test_gpu*"])
    result.stdout.no_fnmatch_line("*test_select.py::test_bench*")  # only gpu_bench's measurement is in the summary


def test_benchmark_only_with_disable_is_a_usage_error(selection: pytest.Pytester) -> None:
    result = selection.runpytest_subprocess("--gpuperf", "--benchmark-only", "--benchmark-disable", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*Can't have both --benchmark-only and --benchmark-disable*"])


def test_a_bad_marker_keyword_fails_its_test_alone_naming_it_as_a_bad_gpuperf_marker_does(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_typo="""
        import pytest

        @pytest.mark.benchmark(max_tme=1)
        def test_typo(benchmark):
            benchmark(abs, -1)

        @pytest.mark.benchmark(max_time="abc")
        def test_text(benchmark):
            benchmark(abs, -1)

        @pytest.mark.gpuperf(remeasure=2.5)
        def test_gpuperf_marker(benchmark):
            benchmark(abs, -1)

        def test_fine(benchmark):
            benchmark(abs, -1)
    """
    )
    result = pytester.runpytest_subprocess("--gpuperf", *FAST)
    result.assert_outcomes(passed=1, errors=3)
    result.stdout.fnmatch_lines(
        [
            "*test_typo.py::test_typo: unknown @pytest.mark.benchmark keyword(s) max_tme*",
            "*test_typo.py::test_text: @pytest.mark.benchmark(max_time=...) must be a positive number, got 'abc'*",
            "*test_typo.py::test_gpuperf_marker: @pytest.mark.gpuperf(remeasure=...)*",
        ],
        consecutive=False,
    )


def test_ignored_options_under_filterwarnings_error_are_notes_not_a_crash(pytester: pytest.Pytester) -> None:
    # a project with pytest's strictest warning setting and pytest-benchmark options in its addopts
    pytester.makeini("[pytest]\nfilterwarnings = error\naddopts = --benchmark-columns=min,max --benchmark-sort=mean\n")
    pytester.makepyfile(test_select=SELECTION_TESTS)
    result = pytester.runpytest_subprocess("--gpuperf", *FAST)
    result.assert_outcomes(passed=3)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([
        "gpuperf: --benchmark-columns is ignored under --gpuperf*",
        "gpuperf: --benchmark-sort is ignored under --gpuperf*",
    ])  # fmt: skip


def test_benchmark_disable_in_addopts_is_overridden_by_gpuperf_and_said(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = --benchmark-disable\n")
    pytester.makepyfile(test_select=SELECTION_TESTS)
    result = pytester.runpytest_subprocess("--gpuperf", *FAST)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["gpuperf: --benchmark-disable (from the ini file's addopts or PYTEST_ADDOPTS) is "
                                 "overridden under --gpuperf: the benchmarks are measured*"])  # fmt: skip
    result.stdout.fnmatch_lines(["*test_select.py::test_bench*"])  # measured: in the summary
    assert "no measurements" not in result.stdout.str()
    # on the command line it is the user's own choice for this run, and stands
    explicit = pytester.runpytest_subprocess("--gpuperf", "--benchmark-disable", *FAST)
    explicit.assert_outcomes(passed=3)
    explicit.stdout.no_fnmatch_line("*test_select.py::test_bench*")
    explicit.stdout.no_fnmatch_line("*is overridden under --gpuperf*")
