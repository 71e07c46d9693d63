"""One event per change (history/events.py): a measurement's statistics moving together are one change point,
in ``gpuperf history changes``, the dashboard's index and the Action's alerts."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import run
from test_action import ACTION, REPO, FakeGitHub

from pytest_gpuperf.cli import EXIT_OK
from pytest_gpuperf.history.events import group_events
from pytest_gpuperf.history.model import ChangeKind, ChangePoint, Point, RecordedValue, RunRecord, Series, SeriesKey
from pytest_gpuperf.history.store import open_store

if str(ACTION) not in sys.path:
    sys.path.append(str(ACTION))

import alert_text
import alerts

TEST = "t.py::test_step"
STATISTICS = ("time.p50", "time.mean", "time.min", "time.p90", "time.p99")


def commit(i: int) -> str:
    return f"{i:02d}".ljust(40, "c")


def _series(statistic: str, n: int = 20, test: str = TEST, device_class: str = "cpu-x") -> Series:
    key = SeriesKey(test, "default", statistic, device_class, "main")
    points = tuple(Point(f"run-{i}", commit(i), f"2026-04-{i + 1:02d}T12:00:00+00:00", "r1", 1.0) for i in range(n))
    return Series(key, "ns", "lower", points)


def _change(s: Series, at: int, change: float, *, p: float = 1e-3, last_good: int | None = None) -> ChangePoint:
    kind = ChangeKind.REGRESSION if change > 0 else ChangeKind.IMPROVEMENT
    good = at - 1 if last_good is None else last_good
    return ChangePoint(s.key, commit(good), commit(at), at, 1.0, 1.0 + change, change, change - 0.01, change + 0.01,
                       p, kind, len(s.points) - at, gradual=last_good is not None, unit="ns")  # fmt: skip


def test_statistics_a_commit_apart_are_one_event_under_the_median() -> None:
    series = [_series(s) for s in STATISTICS]
    p50, mean, _, p90, p99 = series
    # as the issue's example: p50 a..b, p90 b..c (one commit later), the mean at p50's place
    found = [_change(p90, 13, 0.13), _change(p50, 12, 0.105), _change(mean, 12, 0.10), _change(p99, 12, 0.2)]
    [event] = group_events(found, series)
    assert event.key.statistic == "time.p50" and event.first_bad == commit(12)
    assert [s.key.statistic for s in event.supporting] == ["time.mean", "time.p90", "time.p99"]
    assert {c.key.statistic for c in event.with_supporting()} == {"time.p50", "time.mean", "time.p90", "time.p99"}


def test_a_gpus_clock_supports_the_time_it_explains_and_leads_no_event_alone() -> None:
    p50, clock, power = _series("time.p50"), _series("device.sm_clock"), _series("device.power")
    # the time rose where the clock fell (a regression of a "higher is better" series); later the clock alone moved
    found = [_change(p50, 8, 0.12), _change(clock, 8, 0.11), _change(power, 8, -0.2), _change(clock, 15, 0.1)]
    [event] = group_events(found, [p50, clock, power])
    assert event.key.statistic == "time.p50" and event.first_bad == commit(8)
    assert [s.key.statistic for s in event.supporting] == ["device.sm_clock"]


def test_opposite_directions_far_places_and_families_stay_apart() -> None:
    p50, p90 = _series("time.p50"), _series("time.p90")
    memory = _series("memory.peak_allocated")
    reserved = _series("memory.peak_reserved")
    metric = _series("metric.tflops")
    found = [
        _change(p50, 5, 0.10),
        _change(p90, 5, -0.10),  # the other way: not the same change (and no event of its own)
        _change(p50, 15, 0.10),  # ten commits later: another change
        _change(p90, 16, 0.12),  # ... which the p90 saw a commit later
        _change(memory, 5, 0.5),  # memory is its own quantity, even at the same commit
        _change(reserved, 5, 0.4),
        _change(metric, 5, -0.2),
    ]
    events = group_events(found, [p50, p90, memory, reserved, metric])
    assert sorted((e.key.statistic, e.first_bad, len(e.supporting)) for e in events) == [
        ("memory.peak_allocated", commit(5), 1),  # peak reserved supports peak allocated
        ("metric.tflops", commit(5), 0),
        ("time.p50", commit(5), 0),
        ("time.p50", commit(15), 1),
    ]


def test_a_change_the_median_did_not_make_is_no_event() -> None:
    p50, p90, p99 = _series("time.p50"), _series("time.p90"), _series("time.p99")
    tail = [_change(p99, 8, 0.3, p=0.004), _change(p90, 8, 0.2, p=0.001)]
    assert group_events(tail, [p50, p90, p99]) == []
    # where the median's series is not given (gpuperf history changes --statistic time.p9), the
    # most significant statistic leads
    [event] = group_events(tail, [p90, p99])
    assert event.key.statistic == "time.p90" and [s.key.statistic for s in event.supporting] == ["time.p99"]


def test_a_creep_and_a_step_inside_it_are_one_event() -> None:
    p50, mean = _series("time.p50"), _series("time.mean")
    [event] = group_events([_change(p50, 12, 0.2, last_good=6), _change(mean, 9, 0.2)], [p50, mean])
    assert event.key.statistic == "time.p50" and event.gradual


# -- one planted step: one row, one index row, one issue ------------------------------------------------


def _planted_store(url: str) -> list[str]:
    """20 commits; every time statistic of test_step rises 25% at commit 12 (1% noise each); test_flat stays."""
    rng = random.Random(3)
    commits = [commit(i) for i in range(20)]
    with open_store(url) as store:
        for i, sha in enumerate(commits):
            values = []
            for test, centre in ((TEST, 1.25e6 if i >= 12 else 1.0e6), ("t.py::test_flat", 2.0e6)):
                for statistic, scale in zip(STATISTICS, (1.0, 1.02, 0.9, 1.1, 1.3), strict=True):
                    v = centre * scale * (1 + rng.gauss(0, 0.01))
                    values.append(RecordedValue(test, "default", statistic, v, "ns", ci_low=v * 0.99, ci_high=v * 1.01,
                                                p10=v * 0.97, p90=v * 1.03, samples=60))  # fmt: skip
            day = f"2026-04-{i + 1:02d}"
            store.record(RunRecord(f"run-{i}", sha, "main", f"{day}T12:00:00+00:00", "r1", "cpu-x", "baseline", {},
                                   tuple(values), commit_date=f"{day}T10:00:00+00:00"))  # fmt: skip
    return commits


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    yield fake
    fake.close()


def test_one_planted_step_is_one_row_one_index_row_and_one_issue(
    tmp_path: Path, github: FakeGitHub, store_url: str
) -> None:
    commits = _planted_store(store_url)
    code, table, err = run("history", "changes", "--history", store_url)
    assert code == EXIT_OK, err
    rows = [line for line in table.splitlines() if line.startswith(("regression", "improvement"))]
    assert len(rows) == 1 and "time.p50" in rows[0] and commits[12][:10] in rows[0]
    assert "time.p90" in rows[0] and "time.mean" in rows[0]  # the other statistics, as evidence
    _, out, _ = run("history", "changes", "--history", store_url, "--format", "json")
    [event] = json.loads(out)
    assert (event["statistic"], event["first_bad"]) == ("time.p50", commits[12])
    assert {s["statistic"] for s in event["supporting"]} == {"time.mean", "time.min", "time.p90", "time.p99"}
    assert all(abs(s["change"] - 0.25) < 0.05 for s in event["supporting"])

    code, _, err = run("history", "dashboard", "--history", store_url, "--out", str(tmp_path / "site"))
    assert code == EXIT_OK, err
    index = (tmp_path / "site" / "index.html").read_text()
    assert index.count('data-test="t.py::test_step"') == 1 and index.count('data-kind="regression"') == 1
    assert index.count("<tr class=") == 2  # test_step and test_flat: one row per measurement

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / alerts.FILE).write_text(out)
    github.reply("POST", "/graphql", "graphql_viewer.json")
    issues = f"/repos/{REPO}/issues?state=all&per_page=100"
    github.reply("GET", issues, {"status": 200, "headers": {}, "body": []})
    github.reply("POST", f"/repos/{REPO}/issues", "alert_issue_created.json")
    env = github.env(tmp_path, RESULTS_DIR=str(tmp_path / "results"), RECENT="8")
    assert alerts.main(["post"], env) == 0
    created = [body for method, path, body in github.requests() if (method, path) == ("POST", f"/repos/{REPO}/issues")]
    assert len(created) == 1
    assert "time.p90" in created[0]["body"] and "Also seen in" in created[0]["body"]


def test_two_events_of_one_measurement_at_one_commit_share_an_issue() -> None:
    base = {"test": TEST, "measurement": "default", "device_class": "cpu-x", "branch": "main", "unit": "ns",
            "last_good": "a" * 40, "first_bad": "b" * 40, "change": 0.2, "ci_low": 0.1, "ci_high": 0.3,
            "before": 1.0, "after": 1.2, "p_value": 0.001, "kind": "regression", "runs_after": 1,
            "gradual": False}  # fmt: skip
    document = [
        {**base, "statistic": "time.p50", "supporting": [{"statistic": "time.p90", "change": 0.21}]},
        {**base, "statistic": "memory.peak_allocated", "unit": "bytes", "change": 0.5},
    ]
    [issue] = alert_text.new_regressions(alert_text.parse_changes(json.dumps(document), "changes.json"), recent=3)
    assert issue.statistic == "time.p50"
    assert [s for s, _ in issue.supporting] == ["time.p90", "memory.peak_allocated"]
    other_statistic = alert_text.parse_changes(json.dumps([{**base, "statistic": "time.p90"}]), "x")[0]
    assert alert_text.marker(issue) == alert_text.marker(other_statistic)  # the statistic is not in the key
