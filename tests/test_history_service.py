"""The history service: one answer to ``gpuperf history changes`` and the Action's alerts, one new-regression rule."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from cli_helpers import run
from test_cli_history import _step_store

from pytest_gpuperf.history.alerts import ChangeRow, is_new_regression, new_regressions
from pytest_gpuperf.history.model import ChangeKind, ChangePoint, SeriesKey
from pytest_gpuperf.history.render import change_to_json
from pytest_gpuperf.history.service import find_changes
from pytest_gpuperf.history.store import SeriesFilter, open_store

ACTION = Path(__file__).resolve().parent.parent / "action"
if str(ACTION) not in sys.path:  # the Action's scripts import each other as top-level modules, as they run
    sys.path.append(str(ACTION))

import alert_text  # noqa: E402


def test_the_cli_and_the_action_read_the_same_typed_rows(tmp_path: Path, store_url: str) -> None:
    commits = _step_store(store_url)
    with open_store(store_url) as store:
        found = find_changes(store, SeriesFilter())
    rows = [ChangeRow.of(c) for c in found.changes]
    [row] = rows
    assert row.kind is ChangeKind.REGRESSION and (row.last_good, row.first_bad) == (commits[11], commits[12])
    code, out, err = run("history", "changes", "--history", store_url, "--format", "json", "--recent", "8")
    # what the Action reads from the command's JSON is the service's row, typed (kind an enum, not text)
    parsed = alert_text.parse_changes(out, "changes.json")
    assert parsed == rows and parsed[0].kind is ChangeKind.REGRESSION
    # one rule: the command exits 1 and names the change exactly when the Action alerts on it
    for recent in (3, 8):
        code, _, err = run("history", "changes", "--history", store_url, "--recent", str(recent))
        alerted = alert_text.new_regressions(parsed, recent)
        assert (code == 1) == bool(alerted) == is_new_regression(row, recent)
        assert [f"first bad {r.first_bad[:12]}" in err for r in alerted] == [True] * len(alerted)


def test_since_filters_on_the_first_bad_run_s_commit_date(store_url: str) -> None:
    commits = _step_store(store_url)
    with open_store(store_url) as store:
        assert find_changes(store, SeriesFilter(), since="2026-04-14").changes == ()
        assert len(find_changes(store, SeriesFilter(), since=commits[12][:10]).changes) == 1
        assert find_changes(store, SeriesFilter(test="flat")).too_short.measurements == ()


def _change_point(**kw: object) -> ChangePoint:
    fields: dict[str, object] = dict(
        key=SeriesKey("t.py::a", "default", "time.p50", "cpu", "main"), last_good="a" * 40, first_bad="b" * 40,
        index=48, before=1.0, after=1.3, change=0.3, ci_low=0.2, ci_high=0.4, p_value=0.001,
        kind=ChangeKind.REGRESSION, runs_after=2, unit="ns",
    )  # fmt: skip
    fields.update(kw)
    return ChangePoint(**fields)  # type: ignore[arg-type]


def test_new_regressions_keeps_one_row_per_measurement_and_first_bad_commit() -> None:
    time = ChangeRow("t.py::a", "default", "time.p50", "cpu", "main", "ns", "a" * 40, "b" * 40, 0.3, 0.2, 0.4,
                     1.0, 1.3, 0.001, ChangeKind.REGRESSION, 2, False)  # fmt: skip
    memory = ChangeRow("t.py::a", "default", "memory.peak_allocated", "cpu", "main", "bytes", "a" * 40, "b" * 40,
                       0.5, 0.4, 0.6, 1.0, 1.5, 0.001, ChangeKind.REGRESSION, 2, False)  # fmt: skip
    better = ChangeRow("t.py::c", "default", "time.p50", "cpu", "main", "ns", "a" * 40, "b" * 40, -0.3, -0.4, -0.2,
                       1.0, 0.7, 0.001, ChangeKind.IMPROVEMENT, 1, False)  # fmt: skip
    [issue] = new_regressions([time, memory, better], recent=3)
    assert issue.statistic == "time.p50" and issue.supporting == (("memory.peak_allocated", 0.5),)
    assert new_regressions([time], recent=1) == []  # two runs at the new level: not among the newest one


def test_a_pending_regression_raises_no_alert_until_confirmed() -> None:
    row = ChangeRow("t.py::a", "default", "time.p50", "cpu", "main", "ns", "a" * 40, "b" * 40, 0.3, 0.2, 0.4,
                    1.0, 1.3, 0.001, ChangeKind.REGRESSION, 2, False, pending=True)  # fmt: skip
    assert not is_new_regression(row, recent=3) and new_regressions([row], recent=3) == []
    assert is_new_regression(dataclasses.replace(row, pending=False), recent=3)
    # the Action reads the flag from the command's JSON, and a missing one (older JSON) as confirmed
    document = [{**change_to_json(_change_point(pending=True))}]
    assert alert_text.parse_changes(json.dumps(document), "changes.json")[0].pending is True
    del document[0]["pending"]
    assert alert_text.parse_changes(json.dumps(document), "changes.json")[0].pending is False
