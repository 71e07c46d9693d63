"""Progress lines while a suspected regression is being confirmed (report/progress.py)."""

from __future__ import annotations

import pytest

from pytest_gpuperf.report.progress import Progress


def test_lines_name_the_test_and_the_pair() -> None:
    lines: list[str] = []
    progress = Progress(lines.append)
    progress.confirming("tests/x.py::test_a::default", 3, 6)
    progress.remeasuring("tests/x.py::test_b::default", 1, 2)
    assert progress.active
    assert lines == [
        "gpuperf: confirming tests/x.py::test_a::default: fresh pair 3 of 6",
        "gpuperf: re-measuring tests/x.py::test_b::default: 1 of 2",
    ]


def test_without_a_writer_it_does_nothing() -> None:
    progress = Progress()
    assert not progress.active
    progress.confirming("tests/x.py::test_a::default", 1, 6)  # no writer, no error


# A test that stands in for the confirmation code: it reports progress from inside a
# test's call, where pytest captures output, as the engines do.
CONFIRMING = """
from pytest_gpuperf.report.progress import Progress

def test_slow(request):
    progress = Progress.for_config(request.config)
    print("captured output of the test")
    for pair in range(1, 4):
        progress.confirming("test_confirm.py::test_slow::default", pair, 3)
"""


def test_the_lines_reach_the_terminal_through_output_capturing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_confirm=CONFIRMING)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [f"gpuperf: confirming test_confirm.py::test_slow::default: fresh pair {i} of 3" for i in (1, 2, 3)],
        consecutive=True,
    )
    assert "captured output of the test" not in result.stdout.str()  # capturing itself still works
    quiet = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    quiet.stdout.fnmatch_lines(["gpuperf: confirming *: fresh pair 1 of 3"])


@pytest.mark.parametrize("args", [("-q", "-q"), ("-p", "xdist", "-n", "1")], ids=["quiet", "xdist-worker"])
def test_inert_where_nobody_reads_it(pytester: pytest.Pytester, args: tuple[str, ...]) -> None:
    pytester.makepyfile(test_confirm=CONFIRMING)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str()  # -q -q prints no outcome line to parse
    assert "confirming" not in result.stdout.str()


@pytest.mark.slow
def test_a_real_session_shows_its_re_measures_as_they_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin's own Progress, made when the session is configured, writes while the test runs."""
    from test_fresh_remeasure import GATE, PERF_TEST

    pytester.makepyfile(test_perf=PERF_TEST)
    pytester.runpytest_subprocess("--gpuperf-update-baseline", *GATE).assert_outcomes(passed=1)
    monkeypatch.setenv("SLOW", "1")  # four times the work in every process: a suspected regression, re-measured
    result = pytester.runpytest_subprocess("--gpuperf", *GATE)
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["gpuperf: re-measuring test_perf.py::test_*::default: 1 of *"])
