"""Hostile and faulty situations that used to pass silently (issue 29): each now fails, warns or is refused."""

from __future__ import annotations

import re

import pytest
from perf_project import SHORT as FAST

MM = """
import torch

A = torch.randn(16, 16)

def test_mm(gpu_bench):
    gpu_bench(torch.mm, A, A)
"""


def test_update_run_fails_a_violated_hard_bound_and_writes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bound="""
        def test_speedup(gpu_bench):
            gpu_bench(lambda: None)
            gpu_bench.metric("speedup", 0.5, minimum=1.0, tolerance=None)
        """
    )
    result = pytester.runpytest_subprocess("--gpuperf-update-baseline", *FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*speedup = 0.5 is below its minimum 1*"])
    assert not list((pytester.path / "baselines").rglob("*.json"))


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--gpuperf-warmup-time=nan"], "", "*--gpuperf-warmup-time must be a finite, non-negative number*nan*"),
        (["--gpuperf-min-time=inf"], "", "*--gpuperf-min-time must be a finite, non-negative number*inf*"),
        (["--gpuperf-max-time=nan"], "", "*--gpuperf-max-time must be a positive number of seconds, got nan*"),
        ([], "gpuperf_max_time = inf", "*gpuperf_max_time (ini) must be a positive number of seconds, got inf*"),
        ([], "gpuperf_warmup_time = nan", "*gpuperf_warmup_time (ini) must be a finite, non-negative*nan*"),
        ([], "gpuperf_target_precision = 2", "*gpuperf_target_precision (ini) must be in (0, 1), got 2.0*"),
        ([], "gpuperf_profile_diff = maybe", "*gpuperf_profile_diff (ini) must be true or false*'maybe'*"),
    ],
)  # fmt: skip
def test_nan_and_infinite_time_settings_are_usage_errors_naming_the_option(
    pytester: pytest.Pytester, args: list[str], ini: str, message: str
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess("--gpuperf", *args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ("remeasure=2.5", "remeasure=...) must be a whole number >= 0, got 2.5"),
        ("remeasure='2'", "remeasure=...) must be a whole number >= 0, got '2'"),
        ("remeasure=-3", "remeasure=...) must be a whole number >= 0, got -3"),
        ("remeasure=True", "remeasure=...) must be a whole number >= 0, got True"),
        ("l2_flush='yes'", "l2_flush=...) must be True or False, got 'yes'"),
        ("calibrate='on'", "calibrate=...) must be True or False, got 'on'"),
        ("cuda_graph=1", "cuda_graph=...) must be True or False, got 1"),
        ("warmup_time=float('nan')", "warmup_time=...) must be a finite, non-negative number of seconds, got nan"),
        ("max_time=float('inf')", "max_time=...) must be a positive number of seconds, got inf"),
        ("min_time=-1", "min_time=...) must be a finite, non-negative number of seconds, got -1"),
        ("target_precision=0", "target_precision=...) must be a number in (0, 1), got 0"),
        ("threshold=float('nan')", "threshold=...) must be a number in [0, 10), got nan"),
        ("memory_threshold='5%'", "memory_threshold=...) must be a number, got '5%'"),
        ("metric=50", "metric=...) must be one of"),
    ],
)
def test_every_marker_keyword_is_checked_at_collection(keywords: str, message: str) -> None:
    from pytest_gpuperf.config import MarkerOptions
    from pytest_gpuperf.errors import ConfigError

    kwargs = eval(f"dict({keywords})")  # the keyword exactly as a test module writes it
    with pytest.raises(ConfigError) as info:
        MarkerOptions.from_kwargs(kwargs, test_id="t.py::test_x")
    assert str(info.value) == f"t.py::test_x: @pytest.mark.gpuperf({message}" or message in str(info.value)
    assert str(info.value).startswith("t.py::test_x: @pytest.mark.gpuperf(")


def test_a_bad_marker_keyword_fails_that_test_naming_test_and_keyword(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_mark="""
        import pytest

        @pytest.mark.gpuperf(remeasure=2.5)
        def test_x(gpu_bench):
            gpu_bench(lambda: None)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # smoke mode checks it too
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_mark.py::test_x: @pytest.mark.gpuperf(remeasure=...) must be a whole number*"])


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda: map(abs, [1, 2]), "an iterator (map)"),
        (lambda: filter(None, [1, 2]), "an iterator (filter)"),
        (lambda: __import__("itertools").chain([1], [2]), "an iterator (chain)"),
        (lambda: zip([1], [2], strict=True), "an iterator (zip)"),
        (lambda: iter([1, 2]), "an iterator (list_iterator)"),
    ],
)
def test_an_unconsumed_iterator_result_is_refused(make: object, kind: str) -> None:
    import re

    from pytest_gpuperf.errors import MeasurementError
    from pytest_gpuperf.measure.runner import MeasureSpec, check_lazy_result

    with pytest.raises(MeasurementError, match=re.escape(f"t.py::t: measurement 'default' returned {kind}:")):
        check_lazy_result(make(), MeasureSpec(fn=print, test_id="t.py::t"))  # type: ignore[operator]


def test_a_consumed_or_plain_result_is_accepted() -> None:
    import torch

    from pytest_gpuperf.measure.runner import MeasureSpec, check_lazy_result

    for result in (None, [1, 2], (1,), torch.ones(2), {"a": 1}, "text", range(3)):
        assert check_lazy_result(result, MeasureSpec(fn=print, test_id="t.py::t")) is None


def test_a_lazy_map_fails_the_test_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_lazy="""
        import torch

        A = [torch.randn(16, 16) for _ in range(4)]

        def test_map(gpu_bench):
            gpu_bench(lambda: map(torch.mm, A, A))

        def test_list(gpu_bench):
            gpu_bench(lambda: list(map(torch.mm, A, A)))
        """
    )
    for mode in (["--gpuperf"], []):
        result = pytester.runpytest_subprocess(*mode, *FAST)
        result.assert_outcomes(failed=1, passed=1)
        result.stdout.fnmatch_lines(
            ["*test_lazy.py::test_map: measurement 'default' returned an iterator (map): its work runs only as it "
             "is iterated, and nothing iterates it*"]
        )  # fmt: skip


def test_an_unwritable_profile_folder_is_a_note_not_a_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_p="""
        import torch

        A = torch.randn(16, 16)

        def test_mm(gpu_bench):
            gpu_bench(torch.mm, A, A)
        """
    )
    (pytester.path / "blocker").write_text("a file where the folder should be")
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-profile=blocker/traces", "--gpuperf-explain", *FAST)
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    explained = "*test_mm*note (notice): profile trace not written: could not write *blocker*traces*"
    result.stdout.fnmatch_lines(["*test_mm*profile trace not written: could not write * Not a directory", explained])


def test_an_update_run_with_profile_prints_the_top_operators(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_p=MM)
    for _ in range(2):  # the entry added, then kept
        result = pytester.runpytest_subprocess("--gpuperf-update-baseline", "--gpuperf-profile=prof", *FAST)
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["*gpuperf profile: top operators*", "*test_p.py::test_mm::default  (trace: *"])


@pytest.mark.parametrize(
    ("text", "json_path", "problem"),
    [
        ('{"entries": {"t.py::t::default": {"noise": NaN}}}', '$.entries["t.py::t::default"].noise', "NaN"),
        ('{"entries": {"k": {"samples_ns": [1.0, Infinity]}}}', "$.entries.k.samples_ns[1]", "Infinity"),
        ('{"entries": {"k": {"noise": 1e999}}}', "$.entries.k.noise", "number 1e999 is out of range"),
        (
            '{"entries": {"k": {"calls": ' + "9" * 5000 + "}}}",
            "$.entries.k.calls",
            "an integer of 5000 digits is out of range",
        ),
    ],
)
def test_a_non_finite_number_in_a_baseline_is_refused_with_its_json_path(
    tmp_path: object, text: str, json_path: str, problem: str
) -> None:
    from pathlib import Path

    from pytest_gpuperf.baseline.codec import parse_json
    from pytest_gpuperf.errors import BaselineError

    with pytest.raises(BaselineError) as info:
        parse_json(text, Path("b/t.py.json"))
    assert info.value.json_path == json_path
    assert f"baseline file b/t.py.json at {json_path}: not valid JSON: {problem}" in str(info.value)


def test_an_empty_baseline_dir_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_p=MM)
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-baseline-dir=", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-baseline-dir is empty; give a folder*"])


def test_a_missing_baselines_folder_is_said_and_fails_under_strict(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_p=MM)
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-baseline-dir=baslines", *FAST)
    result.assert_outcomes(passed=1)
    said = " ".join(result.stdout.str().split())  # the line is wrapped at 160 characters: the tmp path is long
    assert re.search(r"gpuperf: nothing gated: the baselines folder \S*baslines does not exist, so every test is new; "
                     "record baselines with --gpuperf-update-baseline", said)  # fmt: skip
    strict = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-strict", "--gpuperf-baseline-dir=baslines", *FAST)
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*test_p.py::test_mm: nothing is gated: the baselines folder *baslines does not "
                                 "exist*(--gpuperf-strict)"])  # fmt: skip
    # recording creates the folder; the note is gone once there is one
    pytester.runpytest_subprocess("--gpuperf-update-baseline", "--gpuperf-baseline-dir=baslines", *FAST)
    again = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-strict", "--gpuperf-baseline-dir=baslines", *FAST)
    again.assert_outcomes(passed=1)
    assert "nothing gated" not in again.stdout.str()


def test_a_baselines_folder_left_with_only_lock_files_is_said_as_missing(pytester: pytest.Pytester) -> None:
    """A branch switch takes the tracked baseline files away; git leaves the store's ignored lock files and folders."""
    pytester.makepyfile(test_p=MM)
    pytester.runpytest_subprocess("--gpuperf-update-baseline", *FAST)
    folder = pytester.path / "baselines"
    locks = [p for p in folder.rglob(".*.lock") if p.stat().st_size == 0]
    assert locks
    for tracked in [*folder.rglob("*.json"), folder / ".gitignore"]:
        tracked.unlink()
    result = pytester.runpytest_subprocess("--gpuperf", *FAST)
    result.assert_outcomes(passed=1)
    said = " ".join(result.stdout.str().split())  # the line is wrapped at 160 characters: the tmp path is long
    assert re.search(r"gpuperf: nothing gated: the baselines folder \S*baselines holds no baseline file, so every test "
                     "is new; record baselines with --gpuperf-update-baseline", said)  # fmt: skip


@pytest.mark.parametrize("bidi", ["\u202e", "\u202a", "\u202b", "\u202c", "\u202d", "\u2066", "\u2067", "\u2068",
                                  "\u2069", "\u200e", "\u200f", "\u061c"])  # fmt: skip
def test_bidi_formatting_characters_are_stripped_from_ids_in_every_report(bidi: str) -> None:
    from pytest_gpuperf.report.text import html_text, md_code, md_text, plain

    test_id = f"t.py::test_{bidi}gpj.exe"
    for sanitize in (plain, md_text, html_text):
        assert sanitize(test_id) == "t.py::test_gpj.exe"
    assert md_code(test_id) == "`t.py::test_gpj.exe`"


def test_a_plugin_failure_message_is_printed_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_d="""
        import pytest

        def test_name(gpu_bench):
            gpu_bench.measure(lambda: None, name="a::b")

        def test_twice(gpu_bench):
            gpu_bench.measure(lambda: None, name="first")
            gpu_bench.measure(lambda: None, name="first")
        """
    )
    for mode in (["--gpuperf"], []):
        result = pytester.runpytest_subprocess(*mode, *FAST)
        result.assert_outcomes(failed=2)
        # the failure reports alone: the short summary repeats each message in full where pytest
        # does not cut its lines to the terminal's width (it never does under CI=true)
        out = result.stdout.str().split("short test summary info")[0]
        assert "During handling of the above exception" not in out
        assert out.count("measurement name must be a non-empty string without '::', got 'a::b'") == 1
        assert out.count("measurement 'first' measured twice in one test") == 1


def test_the_comment_shows_trace_paths_relative_to_the_artifact_never_absolute(tmp_path: object) -> None:
    import dataclasses
    from pathlib import Path

    from test_report_helpers import make_session

    from pytest_gpuperf.model import ProfileSummary
    from pytest_gpuperf.report import write_reports

    folder = Path(str(tmp_path)) / "gpuperf-results"
    session = make_session()
    first = session.results[0]
    trace = folder / "traces" / "t.py_test_mm_default.json"
    profile = ProfileSummary(trace_path=str(trace), top_ops=(("aten::mm", 1000.0, 0.9),), activities=("cpu",))
    measurement = dataclasses.replace(first.measurement, profile=profile)
    session = dataclasses.replace(session, results=(dataclasses.replace(first, measurement=measurement),
                                                    *session.results[1:]))  # fmt: skip
    write_reports(session, {"markdown": folder / "comment.md"})
    text = (folder / "comment.md").read_text()
    assert "`traces/t.py_test_mm_default.json`" in text and str(folder) not in text
    from pytest_gpuperf.report.markdown import render_comment

    elsewhere = render_comment(session)  # no folder known (gpuperf report to stdout, the Action's rebuild)
    assert "`t.py_test_mm_default.json`" in elsewhere and str(folder) not in elsewhere


def _two_commits(pytester: pytest.Pytester, base: dict[str, str], head: dict[str, str]) -> None:
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=pytester.path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    for files, message in ((base, "base"), (head, "head")):
        pytester.makepyfile(**files)
        git("add", "-A")
        git("commit", "-qm", message)


COMPARE = ("--gpuperf", "--gpuperf-compare-ref=HEAD~1", "--gpuperf-confirm-pairs=0", "--gpuperf-threshold=5",
           "-p", "no:cacheprovider", "--gpuperf-warmup-time=0.01", "--gpuperf-min-time=0.05",
           "--gpuperf-max-time=0.3")  # fmt: skip
QUICK = "def test_a(gpu_bench):\n    gpu_bench(lambda: sum(range(100)))\n"


@pytest.mark.slow
def test_a_base_that_cannot_import_its_test_is_not_gated_and_a_test_it_lacks_is_new(
    pytester: pytest.Pytester,
) -> None:
    _two_commits(
        pytester,
        base={"test_perf": "import module_that_is_not_there\n\n" + QUICK},
        head={"test_perf": QUICK, "test_added": QUICK.replace("test_a", "test_b")},
    )
    # each side's own tests: a test file the base lacks is new (by default the base would run the head's)
    result = pytester.runpytest_subprocess(*COMPARE, "--gpuperf-base-tests=base", timeout=300)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "test_perf.py::test_a*default * not gated",
        "test_added.py::test_b*default * new",  # absent from the base: new
        "*1 new, 0 not comparable, 1 not gated",
        # the notes' line: the note's start and end (every note in full: --gpuperf-explain)
        "test_perf.py::test_a::default: not gated: test test_perf.py::test_a cannot run at HEAD~1*"
        "module named 'module_that_is_not_there'",
    ], consecutive=False)  # fmt: skip
    strict = pytester.runpytest_subprocess(*COMPARE, "--gpuperf-strict", "--gpuperf-base-tests=base", timeout=300)
    strict.assert_outcomes(passed=1, failed=1)
    strict.stdout.fnmatch_lines(["*FAILED test_perf.py::test_a*"])


@pytest.mark.slow
def test_a_base_whose_measurement_hangs_to_the_time_limit_is_not_gated(pytester: pytest.Pytester) -> None:
    _two_commits(
        pytester,
        base={"test_perf": "import time\n\ndef test_a(gpu_bench):\n    gpu_bench(time.sleep, 60)\n"},
        head={"test_perf": QUICK},
    )
    result = pytester.runpytest_subprocess(*COMPARE, "--gpuperf-time-limit=2", "--gpuperf-explain", timeout=300)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_perf.py::test_a::default: not gated: measurement * failed at * … *time_limit=*",
                                 "*?reference? not gated: measurement * failed at HEAD~1*"])  # fmt: skip
    strict = pytester.runpytest_subprocess(*COMPARE, "--gpuperf-time-limit=2", "--gpuperf-strict", timeout=300)
    strict.assert_outcomes(failed=1)


def test_a_base_missing_from_a_shallow_clone_gets_a_hint_to_fetch_more_history(tmp_path: object) -> None:
    import subprocess
    from pathlib import Path

    from pytest_gpuperf.engines.compare_ref.refs import resolve_ref
    from pytest_gpuperf.errors import ConfigError

    def git(cwd: Path, *args: str) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

    origin = Path(str(tmp_path)) / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    for n in (1, 2, 3):
        (origin / "f.txt").write_text(f"{n}\n")
        git(origin, "add", "f.txt")
        git(origin, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", f"c{n}")
    shallow = Path(str(tmp_path)) / "shallow"
    git(Path(str(tmp_path)), "clone", "-q", "--depth=1", f"file://{origin}", str(shallow))
    with pytest.raises(ConfigError, match=r"HEAD~1: no such commit.*shallow clone.*git fetch --deepen=1 origin "
                                          r"[0-9a-f]{40}; in actions/checkout, fetch-depth: 0"):  # fmt: skip
        resolve_ref(shallow, "HEAD~1")
    with pytest.raises(ConfigError) as full:
        resolve_ref(origin, "no-such-branch")
    assert "shallow" not in str(full.value) and "has no remote to fetch it from" in str(full.value)


def test_a_json_error_reads_once_at_its_place() -> None:
    from pathlib import Path

    from pytest_gpuperf.baseline.codec import parse_json
    from pytest_gpuperf.errors import BaselineError, ResultsError
    from pytest_gpuperf.report.results_json import loads_results

    with pytest.raises(BaselineError) as baseline:
        parse_json('{"entries": "unterminated', Path("b.json"))
    assert "Unterminated string starting at line 1 column 13" in str(baseline.value)
    with pytest.raises(ResultsError) as results:
        loads_results('{"results": "unterminated', "r.json")
    assert "Unterminated string starting at line 1, column 13" in str(results.value)
    assert "at at" not in str(baseline.value) + str(results.value)


def test_the_compare_ref_reference_shown_is_the_one_the_paired_change_was_computed_from() -> None:
    from verdict_helpers import ENV, S, entry, measurement, time_of

    from pytest_gpuperf.verdict import Reference, judge
    from pytest_gpuperf.verdict import evidence as ev
    from pytest_gpuperf.verdict.rulesets import compare_ref_rules

    # round pairs say the head is 4% faster; the pooled base samples (other machine states) say 23%
    head_rounds = [1000.0, 1010.0, 990.0, 2000.0, 2020.0, 1980.0, 1000.0, 1005.0]
    base_rounds = [r / 0.96 for r in head_rounds]
    m = measurement(2835.0, round_medians_ns=tuple(head_rounds))
    evidence = ev.paired_rounds(head_rounds, base_rounds, S, "main")
    result = judge(m, Reference(entry=entry(3679.0), time_evidence=evidence, base_ref="main"), S,
                   compare_ref_rules(), ENV)  # fmt: skip
    c = time_of(result.comparisons)
    assert c.change == pytest.approx(-0.04)
    assert c.current / c.baseline - 1 == pytest.approx(c.change)  # the row reads as its change
