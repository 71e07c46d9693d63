"""``pytest --gpuperf-history=URL``: every measuring session recorded once, in every mode; a dead store warns."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from perf_project import GATE, make_project
from postgres_server import fresh_database

from pytest_gpuperf.history.ingest import ingest_files
from pytest_gpuperf.history.record import StoreAddress, history_address
from pytest_gpuperf.history.store import open_store


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def runs(url: str) -> list[tuple[str, bool, str | None, str]]:
    """(mode, baseline_update, commit, source) of every stored run."""
    import sqlalchemy

    with open_store(url) as store, store.engine.connect() as conn:
        rows = conn.execute(sqlalchemy.text('SELECT mode, baseline_update, "commit", source FROM gpuperf_runs'))
        return sorted((r[0], bool(r[1]), r[2], r[3]) for r in rows)


def test_update_and_baseline_sessions_are_recorded_and_their_results_file_is_the_same_run(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester)
    root = pytester.path
    git(root, "init", "-q")
    git(root, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "c0")
    url = f"sqlite:///{root / 'perf-history.db'}"
    update = pytester.runpytest_subprocess("--gpuperf-update-baseline", f"--gpuperf-history={url}", *GATE)
    update.assert_outcomes(passed=2)
    update.stdout.fnmatch_lines(["gpuperf: recorded run * (* values) in sqlite:///*perf-history.db"])
    gate = pytester.runpytest_subprocess("--gpuperf", f"--gpuperf-history={url}", "--gpuperf-json=r.json", *GATE)
    assert gate.ret in (0, 1)  # the gate's own verdict; recording never changes it
    commit = git(root, "rev-parse", "HEAD").strip()
    assert runs(url) == [("baseline", False, commit, "session"), ("update", True, commit, "session")]
    with open_store(url) as store:
        outcome = ingest_files(store, [root / "r.json"])
        assert outcome.already == (root / "r.json",)  # the session and its results file: one run
        [series] = [s for s in store.load_series() if s.key.statistic == "time.p50"]
        assert [p.baseline_update for p in series.points] == [True, False]
        assert series.key.test == "test_perf.py::test_matmul" and series.key.branch in ("master", "main")


def test_the_environment_variable_and_the_ini_value_name_the_store(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makeini(f"[pytest]\ngpuperf_history = {pytester.path / 'from-ini.db'}\n")
    pytester.runpytest_subprocess("--gpuperf-update-baseline", *GATE).assert_outcomes(passed=2)
    assert len(runs(str(pytester.path / "from-ini.db"))) == 1
    env_store = pytester.path / "from-env.db"
    pytester._monkeypatch.setenv("GPUPERF_HISTORY", str(env_store))
    pytester.runpytest_subprocess("--gpuperf", *GATE)
    assert len(runs(str(env_store))) == 1  # the variable beats the ini file
    assert len(runs(str(pytester.path / "from-ini.db"))) == 1
    assert history_address(None, "ini.db", {"GPUPERF_HISTORY": "env.db"}) == StoreAddress("env.db", "GPUPERF_HISTORY")
    assert history_address("opt.db", "ini.db", {"GPUPERF_HISTORY": "env.db"}) == StoreAddress(
        "opt.db", "--gpuperf-history"
    )
    assert history_address(None, "ini.db", {}) == StoreAddress("ini.db", "gpuperf_history (ini)")
    assert history_address(None, "", {}) is None


@pytest.mark.parametrize(
    "url",
    ["postgresql://perf:hunter2-secret@127.0.0.1:1/perf", "postgresql://perf@127.0.0.1:1/perf?password=hunter2-secret"],
)
def test_an_unreachable_store_is_a_warning_the_verdicts_stand_and_the_results_file_is_written(
    pytester: pytest.Pytester, url: str
) -> None:
    make_project(pytester)
    result = pytester.runpytest_subprocess(
        "--gpuperf-update-baseline", f"--gpuperf-history={url}", "--gpuperf-json=r.json", *GATE
    )
    assert result.ret == 0
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["gpuperf: the run was not recorded: history store postgresql+psycopg://perf*@127.0.0.1:1/*"]
    )
    assert "hunter2-secret" not in result.stdout.str() + result.stderr.str()
    assert (pytester.path / "r.json").is_file()  # to be ingested later
    later = f"sqlite:///{pytester.path / 'later.db'}"
    with open_store(later) as store:
        assert ingest_files(store, [pytester.path / "r.json"]).stored == (pytester.path / "r.json",)


def test_under_xdist_the_controller_records_one_run(pytester: pytest.Pytester, postgres_server: str) -> None:
    pytest.importorskip("xdist")
    make_project(pytester)
    with fresh_database(postgres_server) as url:
        result = pytester.runpytest_subprocess("-n", "2", "--gpuperf-update-baseline", f"--gpuperf-history={url}",
                                               *GATE)  # fmt: skip
        result.assert_outcomes(passed=2)
        assert runs(url) == [("update", True, None, "session")]
        with open_store(url) as store:
            assert store.count_runs() == 1


def test_compare_ref_records_the_heads_numbers(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    root = pytester.path
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "base")
    (root / "notes.txt").write_text("head\n")
    git(root, "add", "-A")
    git(root, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "head")
    url = f"sqlite:///{root.parent / (root.name + '-history.db')}"
    result = pytester.runpytest_subprocess("--gpuperf-compare-ref=HEAD~1", f"--gpuperf-history={url}",
                                           "--gpuperf-confirm-pairs=0", *GATE)  # fmt: skip
    assert result.ret in (0, 1), result.stdout.str()
    head = git(root, "rev-parse", "HEAD").strip()
    assert runs(url) == [("compare-ref", False, head, "session")]


def test_an_interrupted_session_is_not_recorded(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(test_zz_stop="def test_stop():\n    raise KeyboardInterrupt\n")  # Ctrl-C after the perf test
    url = f"sqlite:///{pytester.path / 'perf-history.db'}"
    result = pytester.runpytest_subprocess("--gpuperf-update-baseline", f"--gpuperf-history={url}", *GATE)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["gpuperf: the run was not recorded: the session was interrupted, so its values are "
                                 "partial"])  # fmt: skip
    assert "recorded run" not in result.stdout.str()
    assert not (pytester.path / "perf-history.db").exists() or runs(url) == []


MALFORMED = [  # (address, the secret that must never show, the rule the error names)
    ("postgresql://perf:Pa@ss9Secret@127.0.0.1:55432/perf", "ss9Secret", "one '@' only"),
    ("postgresql://perf:x9Secret@[::1:55432/perf", "x9Secret", "an IPv6 host is written whole in brackets"),
]


@pytest.mark.parametrize(("address", "secret", "rule"), MALFORMED)
@pytest.mark.parametrize("through", ["option", "environment"])
def test_a_malformed_address_is_a_usage_error_naming_the_setting_and_showing_no_credential(
    pytester: pytest.Pytester, address: str, secret: str, rule: str, through: str
) -> None:
    make_project(pytester)
    if through == "environment":
        pytester._monkeypatch.setenv("GPUPERF_HISTORY", address)
        args: tuple[str, ...] = ("--gpuperf-update-baseline", *GATE)
    else:
        args = ("--gpuperf-update-baseline", f"--gpuperf-history={address}", *GATE)
    result = pytester.runpytest_subprocess(*args)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    setting = "GPUPERF_HISTORY" if through == "environment" else "--gpuperf-history"
    assert f"{setting}: history store postgresql://perf:***@" in output and rule in output
    assert "Traceback" not in output and "Pa@" not in output
    assert secret not in output
