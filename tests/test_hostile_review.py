"""Faulty and hostile cases of a second review (issue 45): nothing non-finite, nothing leaked, nothing half-done."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from perf_project import SHORT

# Timing verdicts are not what these cases test: a generous threshold keeps a sub-microsecond
# test from failing on a busy machine and hiding the behaviour under test.
FAST = [*SHORT, "--gpuperf-threshold=5"]

NAN_METRIC = """
import math

def work():
    return sum(range(100))

def test_acc(gpu_bench):
    gpu_bench(work)
    gpu_bench.metric("acc", {value})

def test_inf(gpu_bench):
    gpu_bench(work)
    gpu_bench.metric("acc", {inf})

def test_bound(gpu_bench):
    gpu_bench(work)
    gpu_bench.metric("acc", 0.9, minimum={minimum})

def test_fine(gpu_bench):
    gpu_bench(work)
    gpu_bench.metric("speedup", 2.0)
"""


def _metric_project(pytester: pytest.Pytester, value: str = "0.9", inf: str = "0.9", minimum: str = "0.5") -> None:
    pytester.makepyfile(test_metric=NAN_METRIC.format(value=value, inf=inf, minimum=minimum))


def test_a_metric_or_bound_that_is_not_finite_fails_the_test_naming_it(pytester: pytest.Pytester) -> None:
    _metric_project(pytester)
    pytester.runpytest_subprocess("--gpuperf-update-baseline", *FAST).assert_outcomes(passed=4)
    _metric_project(pytester, value="float('nan')", inf="-math.inf", minimum="float('nan')")
    result = pytester.runpytest_subprocess("--gpuperf", *FAST)
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [f"*test_metric.py::test_{test}: metric 'acc' of measurement 'default': {given} is not a finite number*"
         for test, given in (("acc", "value=nan"), ("inf", "value=-inf"), ("bound", "minimum=nan"))],
        consecutive=False,
    )  # fmt: skip
    result.stdout.no_fnmatch_line("*acc*unchanged*")


@pytest.mark.slow
def test_a_non_finite_metric_fails_the_test_in_compare_ref_mode(pytester: pytest.Pytester) -> None:
    from git_repo import git, init

    init(pytester.path)
    _metric_project(pytester)
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-qm", "base")
    _metric_project(pytester, value="float('nan')")
    result = pytester.runpytest_subprocess("--gpuperf-compare-ref=HEAD", "--gpuperf-confirm-pairs=0", *FAST,
                                           "-k", "acc or fine", timeout=300)  # fmt: skip
    result.assert_outcomes(passed=1, failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*test_metric.py::test_acc: metric 'acc' of measurement 'default': value=nan is not "
                                 "a finite number*"])  # fmt: skip


def test_a_non_finite_metric_fails_its_test_and_every_report_holds_the_rest(pytester: pytest.Pytester) -> None:
    _metric_project(pytester, value="float('nan')")
    pytester.makepyfile(
        test_work="""
        def test_items(gpu_bench):
            gpu_bench.measure(lambda: None, items=float("inf"))
        """
    )
    result = pytester.runpytest_subprocess(
        "--gpuperf", "--gpuperf-json=r.json", "--gpuperf-benchmark-json=b.json", *FAST
    )
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(["*test_work.py::test_items: gpu_bench.measure(items=inf): the work of a call must "
                                 "be a finite number*"])  # fmt: skip
    result.stdout.no_fnmatch_line("*could not write*")
    results = json.loads((pytester.path / "r.json").read_text())
    ids = ["test_metric.py::test_bound", "test_metric.py::test_inf", "test_metric.py::test_fine"]
    assert sorted(r["measurement"]["test_id"] for r in results["results"]) == sorted(ids)
    exported = json.loads((pytester.path / "b.json").read_text())
    assert sorted(b["name"] for b in exported["benchmarks"]) == ["test_bound", "test_fine", "test_inf"]


def test_without_a_terminal_the_reports_are_written_and_the_run_recorded(pytester: pytest.Pytester) -> None:
    from pytest_gpuperf.history.store import open_store

    _metric_project(pytester)
    url = f"sqlite:///{pytester.path / 'perf-history.db'}"
    result = pytester.runpytest_subprocess("-p", "no:terminal", "--gpuperf", "--gpuperf-json=r.json",
                                           f"--gpuperf-history={url}", *FAST)  # fmt: skip
    assert result.ret == pytest.ExitCode.OK
    assert len(json.loads((pytester.path / "r.json").read_text())["results"]) == 4
    with open_store(url) as store:
        assert store.count_runs() == 1


def test_the_baseline_added_line_shows_a_hostile_measurement_name_inert(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_name="""
        def test_a(gpu_bench):
            gpu_bench.measure(lambda: None, name="\\x1b[2J\\x1b[H\\x1b]0;owned\\x07\\x1b[32mALL PASSED\\u202etxt")
        """
    )
    result = pytester.runpytest_subprocess("--gpuperf-update-baseline", *FAST)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpuperf: baseline added: test_name.py::test_a::ALL PASSEDtxt in baselines*.json"])
    assert not any(c in result.stdout.str() for c in ("\x1b", "\x07", "\u202e"))


MARKED = """
import pytest

pytestmark = pytest.mark.gpuperf(threshold=0.5)

@pytest.mark.gpuperf(treshold=0.2)
def test_typo(gpu_bench):
    gpu_bench(lambda: None)

@pytest.mark.gpuperf(min_time=5, max_time=1)
def test_contradiction(gpu_bench, tmp_path_factory):
    gpu_bench(lambda: None)

def test_fine(gpu_bench):
    gpu_bench(lambda: None)

def test_plain():
    pass
"""


@pytest.mark.parametrize("mode", [(), ("--gpuperf",)])
def test_a_bad_marker_fails_only_its_own_test_and_the_file_runs(pytester: pytest.Pytester, mode: tuple[str]) -> None:
    pytester.makepyfile(test_marked=MARKED)
    result = pytester.runpytest_subprocess(*mode, *FAST)
    result.assert_outcomes(passed=2, errors=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*ERROR at setup of test_typo*",
         "test_marked.py::test_typo: unknown @pytest.mark.gpuperf keyword(s) treshold; known: *",
         "*ERROR at setup of test_contradiction*",
         "test_marked.py::test_contradiction: @pytest.mark.gpuperf(threshold=0.5, min_time=5, max_time=1): min time 5s "
         "exceeds max time 1s"],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("ref", "hint"),
    [("--upload-pack=touch /tmp/x", "('--upload-pack=touch /tmp/x' is no branch, tag or commit hash a remote could "
                                    "have, so no fetch can bring it)"),
     ("main; rm -rf ~", "('main; rm -rf ' is no branch, tag or commit hash a remote could have, so no fetch can "
                        "bring it)"),
     ("no-such-branch", "(a branch of origin: git fetch origin +refs/heads/no-such-branch:refs/remotes/origin/"
                        "no-such-branch, then compare with --gpuperf-compare-ref=origin/no-such-branch; a tag: git "
                        "fetch origin tag no-such-branch)")],
)  # fmt: skip
def test_the_fetch_hint_for_an_unknown_ref_is_a_command_safe_to_copy(tmp_path: Path, ref: str, hint: str) -> None:
    from git_repo import git, init

    from pytest_gpuperf.engines.compare_ref.refs import resolve_ref
    from pytest_gpuperf.errors import ConfigError

    init(tmp_path / "origin")
    git(tmp_path / "origin", "commit", "-q", "--allow-empty", "-m", "c0")
    git(tmp_path, "clone", "-q", str(tmp_path / "origin"), "clone")
    with pytest.raises(ConfigError) as info:
        resolve_ref(tmp_path / "clone", ref)
    assert str(info.value).endswith(hint)


E_TESTS = """
import os
import signal

import pytest

@pytest.mark.parametrize("n", range(4))
def test_e(gpu_bench, n):
    if n == 0 and os.environ.get("KILL_THE_ZYGOTE") and os.path.basename(os.getcwd()) != "{head}":
        os.kill(os.getppid(), signal.SIGKILL)  # the base worker's parent: the zygote
    gpu_bench(lambda: sum(range(100)))
"""


@pytest.mark.slow
def test_after_the_workers_parent_is_killed_each_failure_names_its_own_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from git_repo import git, init

    init(pytester.path)
    pytester.makepyfile(test_e=E_TESTS.format(head=pytester.path.name))
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-qm", "base")
    monkeypatch.setenv("KILL_THE_ZYGOTE", "1")
    result = pytester.runpytest_subprocess("--gpuperf-compare-ref=HEAD", "--gpuperf-confirm-pairs=0", *FAST,
                                           timeout=300)  # fmt: skip
    result.assert_outcomes(failed=4)
    out = result.stdout.str()
    assert "while the head waited for test_e.py::test_e[0]::default at HEAD" in out
    for n in range(1, 4):  # not "waited for test_e.py::test_e[0] to finish" three more times
        assert f"before test_e.py::test_e[{n}]::default could run at HEAD" in out
    assert "test_e[0] to finish" not in out


@pytest.mark.slow
def test_a_base_that_hangs_at_import_fails_after_the_start_timeout_with_where_it_hung(
    pytester: pytest.Pytester,
) -> None:
    from git_repo import git, init

    init(pytester.path)
    pytester.makepyfile(
        test_hang="import time\n\ntime.sleep(600)\n\ndef test_a(gpu_bench):\n    gpu_bench(lambda: None)\n"
    )
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-qm", "base")
    pytester.makepyfile(test_hang="def test_a(gpu_bench):\n    gpu_bench(lambda: None)\n")
    started = time.monotonic()
    result = pytester.runpytest_subprocess("--gpuperf-compare-ref=HEAD", "--gpuperf-confirm-pairs=0",
                                           "--gpuperf-worker-start-timeout=30", *FAST, timeout=300)  # fmt: skip
    assert time.monotonic() - started < 120  # not the fixed 300 s
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # a base that cannot start: not a regression
    output = result.stdout.str() + result.stderr.str()
    assert "no answer from the worker within 30s while waiting for the worker to collect" in output
    assert "line 3 in <module>" in output and "test_hang.py" in output
    assert "worker.log" not in output  # its folder is gone after the session: the message has it all


def test_the_worker_start_timeout_is_a_time_setting(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = pytester.runpytest_subprocess("--gpuperf-worker-start-timeout=nan", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-worker-start-timeout must be a positive number of seconds, got nan*"])
