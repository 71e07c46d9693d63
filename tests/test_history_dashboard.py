"""The history dashboard: the generated site's content, its offline-ness, and headless Chromium rendering it."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import random
import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from chromium import browser
from matplotlib import image as mpl_image
from test_report_profile_helpers import cpu_extra_op_diff

from pytest_gpuperf.history.dashboard import DashboardError, build_site, diff_key
from pytest_gpuperf.history.dashboard.axes import CommitAxis
from pytest_gpuperf.history.dashboard.frame import document
from pytest_gpuperf.history.events import measurement_key
from pytest_gpuperf.history.model import ChangeKind, ChangePoint, Point, Series, SeriesKey
from pytest_gpuperf.report.codec import to_json
from pytest_gpuperf.report.html import why_section
from pytest_gpuperf.report.units import format_change

ATTN = "tests/perf/test_attn.py::test_sdpa[bf16]"
MLP = "tests/perf/test_mlp.py::test_forward"
CONV = "tests/perf/test_conv.py::test_conv2d"
H100, A100 = "nvidia-h100-80gb-hbm3", "nvidia-a100-sxm4-40gb"
RUNS = 40
START = datetime(2026, 9, 1, tzinfo=timezone.utc)
HOSTILE_TEST = "tests/t.py::test_x[<script>alert(1)</script>\"'&../../etc]"
HOSTILE_BRANCH = '"><img src=x onerror=alert(2)>'
HOSTILE_RUNNER = "</title><script>alert(3)</script>"
HOSTILE_CLASS = "gpu<b onmouseover=alert(4)>'\""


def commit(i: int) -> str:
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def series(
    test: str,
    statistic: str = "time.p50",
    device_class: str = H100,
    *,
    base: float = 1.2e6,
    unit: str = "ns",
    step_at: int | None = None,
    step: float = 0.0,
    branch: str = "main",
    runner: str = "runner-1",
    updates: Sequence[int] = (),
    diffs: Sequence[int] = (),
    band: bool = True,
    runs: int = RUNS,
) -> Series:
    rng = random.Random(f"{test}{statistic}{device_class}")
    points = []
    for i in range(runs):
        level = base * (1 + step if step_at is not None and i >= step_at else 1)
        value = level * (1 + rng.gauss(0, 0.005))
        when = (START + timedelta(hours=6 * i)).isoformat()
        points.append(
            Point(
                run_id=f"run-{device_class}-{i}",
                commit=commit(i),
                started_at=when,
                commit_date=when,
                runner=runner,
                value=value,
                p10=value * 0.98 if band else None,
                p90=value * 1.03 if band else None,
                samples=60,
                baseline_update=i in updates,
                has_profile_diff=i in diffs,
            )
        )
    return Series(SeriesKey(test, "default", statistic, device_class, branch), unit, "lower", tuple(points))


def change_at(s: Series, index: int, kind: ChangeKind, runs_after: int | None = None) -> ChangePoint:
    before = float(np.mean([p.value for p in s.points[:index]]))
    after = float(np.mean([p.value for p in s.points[index:]]))
    change = after / before - 1
    return ChangePoint(
        key=s.key,
        last_good=s.points[index - 1].commit,
        first_bad=s.points[index].commit,
        index=index,
        before=before,
        after=after,
        change=change,
        ci_low=change - 0.01,
        ci_high=change + 0.01,
        p_value=1e-6,
        kind=kind,
        runs_after=len(s.points) - index if runs_after is None else runs_after,
    )


@dataclasses.dataclass
class Fixture:
    series: list[Series]
    changes: list[ChangePoint]
    diffs: dict[str, dict[str, object]]
    index: Path

    @property
    def root(self) -> Path:
        return self.index.parent


def fleet() -> tuple[list[Series], list[ChangePoint], dict[str, dict[str, object]]]:
    """Three tests on two device classes: a recent regression with a profile diff, an older one, an improvement."""
    attn_h100 = series(ATTN, step_at=30, step=0.15, updates=(12,), diffs=(30,))
    attn_a100 = series(ATTN, device_class=A100, base=2.0e6, step_at=20, step=-0.10, runner="runner-a100")
    attn_memory = series(ATTN, "memory.peak_allocated", base=3.0 * 2**30, unit="bytes", band=False, updates=(12,))
    attn_metric = series(ATTN, "metric.tflops", base=310.0, unit="TFLOP/s", band=False)
    mlp = series(MLP, step_at=10, step=0.08)
    conv = series(CONV)
    changes = [
        change_at(attn_h100, 30, ChangeKind.REGRESSION),
        change_at(attn_a100, 20, ChangeKind.IMPROVEMENT),
        change_at(mlp, 10, ChangeKind.REGRESSION),
    ]
    diffs = {diff_key(attn_h100.points[30].run_id, attn_h100.key): to_json(cpu_extra_op_diff())}
    return [conv, mlp, attn_metric, attn_memory, attn_a100, attn_h100], changes, diffs


@pytest.fixture
def site(tmp_path: Path) -> Fixture:
    all_series, changes, diffs = fleet()
    index = build_site(all_series, changes, tmp_path / "site", title="GPU fleet", profile_diffs=diffs)
    return Fixture(all_series, changes, diffs, index)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(html: str, name: str | None = None) -> list[dict[str, str | None]]:
    parser = _Tags()
    parser.feed(html)
    return [attrs for tag, attrs in parser.tags if name is None or tag == name]


def pages(root: Path) -> list[Path]:
    return sorted(root.rglob("*.html"))


def series_page(fixture: Fixture, test: str) -> str:
    index = fixture.index.read_text()
    href = next(a["href"] for a in tags(index, "a") if a.get("href") and test in _row_of(index, a["href"]))
    assert href is not None
    return (fixture.root / href.split("#")[0]).read_text()


def _row_of(index: str, href: str) -> str:
    return next(row for row in re.findall(r"<tr class=.*?</tr>", index, flags=re.S) if f'href="{href}"' in row)


# -- the index ------------------------------------------------------------------------------------


def test_the_index_has_one_row_per_measurement_recent_regressions_first(site: Fixture) -> None:
    index = site.index.read_text()
    rows = tags(index, "tr")[1:]  # the header row has no data
    # ATTN on H100 has three statistics (time, memory, a metric) and ATTN on A100 one: one row each
    measurements = {(s.key.test, s.key.measurement, s.key.device_class, s.key.branch) for s in site.series}
    assert len(rows) == len(measurements) == 4 < len(site.series)
    order = [(row["data-test"], row["data-kind"], row["data-device"]) for row in rows]
    # the ATTN regression (10 runs ago) before the MLP one (30 runs ago), then the improvement, then the rest
    assert order[:3] == [(ATTN, "regression", H100), (MLP, "regression", H100), (ATTN, "improvement", A100)]
    assert {kind for _, kind, _ in order[3:]} == {"none"}
    attn_change = site.changes[0]
    first_row = re.findall(r"<tr class=.*?</tr>", index, flags=re.S)[0]
    assert f"{attn_change.last_good[:10]}..{attn_change.first_bad[:10]}</span> +" in first_row
    assert attn_change.first_bad in first_row  # the full hash, in the hover title
    # the trend column: the median's line, and the latest change as a band at its runs
    spark = re.search(r'<svg class="spark".*?</svg>', first_row, flags=re.S)
    assert spark is not None
    assert len(tags(spark.group(0), "polyline")[0]["points"].split()) == RUNS  # type: ignore[union-attr]
    assert [r["class"] for r in tags(spark.group(0), "rect")] == ["change regression"]
    assert len(re.findall(r'<svg class="spark"', index)) == len(rows)


def test_the_index_filters_by_device_class_and_test(site: Fixture) -> None:
    index = site.index.read_text()
    form = tags(index, "form")[0]
    assert form["id"] == "filters" and "hidden" in form  # shown by the script, useless without it
    options = [o["value"] for o in tags(index, "option")]
    assert options == ["", A100, H100]
    assert {t["name"] for t in tags(index, "input")} == {"test", "regressions"}
    scripts = tags(index, "script")
    assert [s["src"] for s in scripts] == ["assets/dashboard.js"]
    assert (site.root / "assets/dashboard.js").read_text().count("addEventListener") >= 3


# -- a series page --------------------------------------------------------------------------------


def test_a_page_per_test_measurement_and_branch_with_a_chart_per_statistic(site: Fixture) -> None:
    assert len(list((site.root / "series").glob("*.html"))) == 3  # ATTN, MLP, CONV on main
    page = series_page(site, ATTN)
    charts = re.findall(r'<svg class="chart".*?</svg>', page, flags=re.S)
    titles = [re.search(r"<title>(.*?) by commit", c).group(1) for c in charts]  # type: ignore[union-attr]
    assert titles == ["time.p50", "memory.peak_allocated", "metric.tflops"]  # time first, then memory, metrics
    time_chart = charts[0]
    lines = tags(time_chart, "polyline")
    assert len(lines) == 2  # one median line per device class: H100 and A100 never mix
    assert lines[0]["stroke"] != lines[1]["stroke"]
    for line in lines:
        assert line["points"] is not None and len(line["points"].split()) == RUNS
    assert len(tags(time_chart, "polygon")) == 2  # a p10-p90 band per device class
    assert len(tags(time_chart, "circle")) == 2 * RUNS  # every run a point with a hover title
    # memory and metrics: no band where the runs carry no spread
    assert not tags(charts[1], "polygon") and len(tags(charts[1], "polyline")) == 1


def test_points_have_hover_titles_with_commit_runner_and_value(site: Fixture) -> None:
    page = series_page(site, ATTN)
    a100_titles = re.findall(r"<circle[^>]*><title>([^<]*runner-a100[^<]*)</title>", page)
    assert len(a100_titles) == RUNS
    first = a100_titles[0]
    assert f"commit {commit(0)[:10]} (2026-09-01)" in first
    assert "runner runner-a100, " + A100 in first
    assert re.search(r"time\.p50 \d\.\d{3} ms", first)
    assert re.search(r"p10-p90 \d\.\d{3} ms to \d\.\d{3} ms", first)


def test_change_points_are_marked_with_their_commit_range_and_change(site: Fixture) -> None:
    page = series_page(site, ATTN)
    regression, improvement = site.changes[0], site.changes[1]
    marks = re.findall(r'<rect class="change (\w+)"[^>]*><title>([^<]*)</title>', page)
    assert [kind for kind, _ in marks] == ["improvement", "regression"] or [k for k, _ in marks] == [
        "regression",
        "improvement",
    ]
    titles = dict(marks)
    assert f"last good {regression.last_good}\nfirst bad {regression.first_bad}" in titles["regression"]
    assert f"regression on {H100}: {format_change(regression.change)} (95% CI" in titles["regression"]
    assert f"first bad {improvement.first_bad}" in titles["improvement"]
    labels = re.findall(r'<text class="change-label[^>]*>([^<]*)<title>', page)
    expected = {
        f"{H100} {regression.last_good[:10]}..{regression.first_bad[:10]} {format_change(regression.change)}",
        f"{A100} {improvement.last_good[:10]}..{improvement.first_bad[:10]} {format_change(improvement.change)}",
    }
    assert set(labels) == expected
    table = re.search(r'<table class="changes">.*?</table>', page, flags=re.S)
    assert table is not None and table.group(0).count('<tr class="') == 2


def test_baseline_updates_are_marked_on_every_chart_that_has_them(site: Fixture) -> None:
    page = series_page(site, ATTN)
    updates = re.findall(r'<g class="update">.*?<title>([^<]*)</title></g>', page)
    assert updates == [f"baseline updated at {commit(12)[:10]} by runner-1 ({H100})"] * 2  # time and memory
    table = re.search(r'<table class="updates">.*?</table>', page, flags=re.S)
    assert table is not None and commit(12) in table.group(0)


def test_device_classes_share_the_commit_axis() -> None:
    h100 = series(ATTN)
    a100 = series(ATTN, device_class=A100)
    later = dataclasses.replace(a100, points=a100.points[10:])  # the A100 runner joined later
    axis = CommitAxis.of([h100, later])
    assert len(axis) == RUNS
    assert axis.slots(later) == axis.slots(h100)[10:]
    # two runs of one commit in one series share its slot, a little apart
    twice = dataclasses.replace(h100, points=(h100.points[0], dataclasses.replace(h100.points[0], run_id="again")))
    first, second = CommitAxis.of([twice]).slots(twice)
    assert -0.5 < first < second < 0.5


def test_a_change_point_links_its_profile_diff_rendered_as_the_html_report_does(site: Fixture) -> None:
    page = series_page(site, ATTN)
    diff_pages = list((site.root / "diffs").glob("*.html"))
    assert len(diff_pages) == 1
    href = f"../diffs/{diff_pages[0].name}"
    links = [a for a in tags(page, "a") if a.get("href") == href]
    assert len(links) == 3  # the run's point, the change point's label, its row in the table
    diff_page = diff_pages[0].read_text()
    key = f"{ATTN}::default".replace("[", "[")
    assert why_section(cpu_extra_op_diff(), key).replace("&#x27;", "'") in diff_page.replace("&#x27;", "'")
    assert "aten::gelu" in diff_page and "added, 1 call" in diff_page
    assert commit(30) in diff_page


# -- offline, escaped, written safely ---------------------------------------------------------------


def _local_targets(root: Path) -> list[tuple[Path, str]]:
    found = []
    for page in pages(root):
        html = page.read_text()
        for attrs in tags(html):
            for name in ("href", "src", "action", "srcset", "poster", "data"):
                value = attrs.get(name)
                if value is not None:
                    found.append((page, value))
    return found


def test_every_link_and_resource_is_a_file_of_the_site(site: Fixture) -> None:
    root = site.root.resolve()
    targets = _local_targets(root)
    assert targets
    for page, value in targets:
        if value.startswith("data:") or value.startswith("#"):
            continue
        assert not re.match(r"^[a-z][a-z0-9+.-]*:", value, flags=re.I), f"{page}: {value} leaves the site"
        target = (page.parent / value.split("#")[0]).resolve()
        assert target.is_file() and root in target.parents, f"{page}: {value} is not a file of the site"
    for page in pages(root):
        html = page.read_text()
        assert "Content-Security-Policy" in html
        assert not re.search(r"@import|url\(|@font-face", html)
    css = (root / "assets/dashboard.css").read_text()
    assert not re.search(r"@import|url\(|@font-face", css)
    assert not re.search(
        r"fetch\(|XMLHttpRequest|import\(|WebSocket|src\s*=", (root / "assets/dashboard.js").read_text()
    )


def hostile_site(tmp_path: Path) -> tuple[Path, list[Series]]:
    s = series(HOSTILE_TEST, device_class=HOSTILE_CLASS, branch=HOSTILE_BRANCH, runner=HOSTILE_RUNNER,
               step_at=20, step=0.2, diffs=(20,))  # fmt: skip
    metric = series(HOSTILE_TEST, "metric.<i>x</i>", device_class=HOSTILE_CLASS, branch=HOSTILE_BRANCH,
                    unit="<u>u</u>", band=False)  # fmt: skip
    diffs = {diff_key(s.points[20].run_id, s.key): to_json(cpu_extra_op_diff())}
    index = build_site([s, metric], [change_at(s, 20, ChangeKind.REGRESSION)], tmp_path / "site",
                       title="<script>alert(5)</script>", profile_diffs=diffs)  # fmt: skip
    return index, [s, metric]


def test_user_controlled_text_is_escaped_everywhere(tmp_path: Path) -> None:
    index, _ = hostile_site(tmp_path)
    root = index.parent
    written = pages(root)
    assert len(written) == 3  # the index, one series page, one profile diff
    for page in written:
        html = page.read_text()
        assert len(re.findall(r"<script", html)) == (0 if page.parent.name == "diffs" else 1), page
        for raw in ("<img src=x", "<b onmouseover", "<i>x</i>", "<u>u</u>", "</title><script>"):
            assert raw not in html, (page, raw)
    series_html = next(p for p in written if p.parent.name == "series").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in series_html
    assert "&lt;/title&gt;&lt;script&gt;alert(3)&lt;/script&gt;" in series_html  # the runner, in hover titles
    assert "metric.&lt;i&gt;x&lt;/i&gt;" in series_html


def test_file_names_are_sanitised_and_stay_inside_the_site(tmp_path: Path) -> None:
    index, _ = hostile_site(tmp_path)
    root = index.parent.resolve()
    for path in root.rglob("*"):
        assert root in path.resolve().parents
        assert re.fullmatch(r"[a-z0-9._~-]+", path.name), path.name
    assert not (tmp_path / "etc").exists()


def test_rebuilding_replaces_pages_and_removes_those_of_series_gone(site: Fixture) -> None:
    stray = site.root / "notes.txt"
    stray.write_text("kept")
    before = {p.name for p in (site.root / "series").iterdir()}
    remaining = [s for s in site.series if s.key.test != MLP]
    changes = [c for c in site.changes if c.key.test != MLP]
    build_site(remaining, changes, site.root, title="GPU fleet", profile_diffs=site.diffs)
    after = {p.name for p in (site.root / "series").iterdir()}
    assert len(after) == len(before) - 1 and after < before
    assert stray.read_text() == "kept"
    assert not [p for p in site.root.rglob("*") if p.name.endswith(".tmp")]
    assert MLP not in site.index.read_text()


def test_the_same_input_builds_the_same_bytes(tmp_path: Path) -> None:
    all_series, changes, diffs = fleet()
    first = build_site(all_series, changes, tmp_path / "a", profile_diffs=diffs).parent
    second = build_site(list(reversed(all_series)), changes, tmp_path / "b", profile_diffs=diffs).parent
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)


# -- bad input ---------------------------------------------------------------------------------


def test_a_change_point_of_a_series_not_given_is_refused_by_name(tmp_path: Path) -> None:
    mlp = series(MLP, step_at=10, step=0.1)
    with pytest.raises(DashboardError, match=re.escape(f"no series {mlp.key.label} was given")):
        build_site([series(CONV)], [change_at(mlp, 10, ChangeKind.REGRESSION)], tmp_path / "site")
    assert not (tmp_path / "site").exists()  # nothing written before the input was checked


def test_a_change_point_off_its_first_bad_commit_is_refused(tmp_path: Path) -> None:
    mlp = series(MLP, step_at=10, step=0.1)
    wrong = dataclasses.replace(change_at(mlp, 10, ChangeKind.REGRESSION), index=11)
    with pytest.raises(DashboardError, match=f"point 11 is commit {commit(11)}, not its first bad commit"):
        build_site([mlp], [wrong], tmp_path / "site")
    outside = dataclasses.replace(wrong, index=RUNS)
    with pytest.raises(DashboardError, match=f"index {RUNS} is outside its {RUNS} points"):
        build_site([mlp], [outside], tmp_path / "site")


def test_a_broken_profile_diff_is_refused_naming_its_key(tmp_path: Path) -> None:
    s = series(MLP, diffs=(5,))
    key = diff_key(s.points[5].run_id, s.key)
    broken = {key: {"base_label": "baseline abc"}}  # no head
    with pytest.raises(DashboardError, match=re.escape(f"profile diff {key!r} is not a ProfileDiff")):
        build_site([s], [], tmp_path / "site", profile_diffs=broken)


def test_a_run_time_that_is_not_iso_8601_is_refused_naming_the_run(tmp_path: Path) -> None:
    s = series(MLP)
    bad = dataclasses.replace(s, points=(*s.points[:3], dataclasses.replace(s.points[3], commit_date="yesterday")))
    with pytest.raises(DashboardError, match=f"run {s.points[3].run_id} of {re.escape(s.key.label)}: 'yesterday'"):
        build_site([bad], [], tmp_path / "site")
    assert not (tmp_path / "site").exists()


def test_a_series_given_twice_is_refused(tmp_path: Path) -> None:
    s = series(MLP)
    with pytest.raises(DashboardError, match="is given twice"):
        build_site([s, s], [], tmp_path / "site")


def test_an_empty_history_builds_an_index_that_says_so(tmp_path: Path) -> None:
    index = build_site([], [], tmp_path / "site")
    assert "0 measurements on 0 pages" in index.read_text()


# -- headless Chromium ----------------------------------------------------------------------------


def _offline(visit_requests: list[str], root: Path) -> list[str]:
    """The requests that are not a file of the site (data: URIs are no request to anyone)."""
    prefix = root.resolve().as_uri() + "/"
    return [url for url in visit_requests if not url.startswith(prefix) and not url.startswith("data:")]


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(mpl_image.imread(io.BytesIO(png), format="png"))[..., :3]


def _near(pixels: np.ndarray, rgb: tuple[int, int, int], tolerance: float = 0.03) -> int:
    return int(np.all(np.abs(pixels - np.array(rgb) / 255) < tolerance, axis=-1).sum())


def _no_errors(log: list[dict[str, object]]) -> list[dict[str, object]]:
    return [entry for entry in log if entry.get("level") == "error"]


def test_chromium_renders_the_index_and_its_filters_offline(site: Fixture, tmp_path: Path) -> None:
    with browser(tmp_path) as chrome:
        visit = chrome.visit(site.index.as_uri())
        assert _offline(visit.requests, site.root) == []
        assert sorted(visit.requests) == sorted(
            (site.root / name).resolve().as_uri()
            for name in ("index.html", "assets/dashboard.css", "assets/dashboard.js")
        )
        assert _no_errors(visit.log) == [] and visit.dialogs == []
        # the script ran: the filters are shown and count the rows
        assert chrome.evaluate("document.getElementById('filters').hidden") is False
        # one row per measurement (its statistics are one row, with a chart of its median)
        measurements = len({measurement_key(s.key) for s in site.series})
        assert measurements < len(site.series)
        shown_count = chrome.evaluate("document.getElementById('shown').textContent")
        assert shown_count == f"{measurements} of {measurements} measurements"
        shown = ("Array.from(document.querySelectorAll('#series tbody tr')).filter(r => !r.hidden)"
                 ".map(r => r.dataset.test + ' ' + r.dataset.device)")  # fmt: skip
        pick = ("(() => {{ const f = document.getElementById('filters'); f.elements.device.value = {!r}; "
                "f.dispatchEvent(new Event('change')); }})()")  # fmt: skip
        chrome.evaluate(pick.format(A100))
        assert chrome.evaluate(shown) == [f"{ATTN} {A100}"]
        assert "device=" in chrome.evaluate("location.hash")
        chrome.evaluate(pick.format(""))
        chrome.evaluate("(() => { const f = document.getElementById('filters'); f.elements.test.value = 'MLP.py'; "
                        "f.dispatchEvent(new Event('input')); })()")  # fmt: skip
        assert chrome.evaluate(shown) == [f"{MLP} {H100}"]
        # a linked filter: regressions only, from the URL's fragment, on a fresh load
        chrome.visit("about:blank")
        chrome.visit(site.index.as_uri() + "#regressions=1")
        assert sorted(chrome.evaluate(shown)) == sorted([f"{ATTN} {H100}", f"{MLP} {H100}"])
        assert chrome.evaluate("document.getElementById('filters').elements.regressions.checked") is True


def test_chromium_shows_the_change_points_on_a_series_page(site: Fixture, tmp_path: Path) -> None:
    page = next(p for p in (site.root / "series").glob("*.html") if "test_attn" in p.name)
    with browser(tmp_path) as chrome:
        visit = chrome.visit(page.as_uri())
        assert _offline(visit.requests, site.root) == []
        assert _no_errors(visit.log) == [] and visit.dialogs == []
        boxes = chrome.evaluate(
            "Array.from(document.querySelectorAll('svg.chart rect.change')).map(r => {"
            "const b = r.getBoundingClientRect(); return [r.classList[1], b.width, b.height]; })"
        )
        assert sorted(kind for kind, _, _ in boxes) == ["improvement", "regression"]
        assert all(width > 0 and height > 100 for _, width, height in boxes)
        labels = chrome.evaluate("Array.from(document.querySelectorAll('.change-label')).map(t => t.textContent)")
        regression = site.changes[0]
        assert f"{H100} {regression.last_good[:10]}..{regression.first_bad[:10]} +" in " ".join(labels)
        shot = _pixels(chrome.screenshot(1400, 1000))
    white = np.all(shot > 0.97, axis=-1).mean()
    assert white < 0.95, "the page is blank"
    # the regression's span: #d62728 at 22% over white; the H100 line's blue; the label's red
    assert _near(shot, (246, 207, 208)) > 300
    assert _near(shot, (0x1F, 0x77, 0xB4), 0.08) > 200
    assert _near(shot, (0xD6, 0x27, 0x28), 0.08) > 50


def test_chromium_follows_a_change_point_to_its_profile_diff(site: Fixture, tmp_path: Path) -> None:
    page = next(p for p in (site.root / "series").glob("*.html") if "test_attn" in p.name)
    with browser(tmp_path) as chrome:
        chrome.visit(page.as_uri())
        href = chrome.evaluate("document.querySelector('svg.chart a text.change-label').parentElement"
                               ".getAttribute('href')")  # fmt: skip
        visit = chrome.visit((page.parent / href).resolve().as_uri())
        assert _offline(visit.requests, site.root) == []
        assert _no_errors(visit.log) == []
        ops = chrome.evaluate("Array.from(document.querySelectorAll('section.why td code')).map(c => c.textContent)")
        assert ops[:2] == ["aten::gelu", "aten::copy_"]
        assert chrome.evaluate("document.querySelector('section.why img').naturalWidth") > 100  # the bar chart


def test_chromium_runs_nothing_from_a_hostile_id(tmp_path: Path) -> None:
    index, _ = hostile_site(tmp_path)
    root = index.parent
    with browser(tmp_path) as chrome:
        for page in pages(root):
            visit = chrome.visit(page.as_uri())
            assert visit.dialogs == [], page
            assert _offline(visit.requests, root) == [], page
            assert _no_errors(visit.log) == [], page
        chrome.visit(next((root / "series").glob("*.html")).as_uri())
        assert chrome.evaluate("document.querySelector('h1 code').textContent") == HOSTILE_TEST


def test_the_request_recorder_sees_what_a_page_fetches(tmp_path: Path) -> None:
    """The control for the offline tests: a page that does reach out is caught, and the site's policy stops it."""
    leaky = tmp_path / "leaky.html"
    leaky.write_text('<!DOCTYPE html><img src="http://127.0.0.1:9/pixel.png">'
                     '<script>fetch("http://127.0.0.1:9/beacon").catch(() => 0)</script>')  # fmt: skip
    guarded = tmp_path / "guarded.html"
    guarded.write_text(document("guarded", '<img src="http://127.0.0.1:9/pixel.png">', root=""))
    with browser(tmp_path) as chrome:
        visit = chrome.visit(leaky.as_uri())
        assert _offline(visit.requests, tmp_path) == ["http://127.0.0.1:9/pixel.png", "http://127.0.0.1:9/beacon"]
        visit = chrome.visit(guarded.as_uri())
        assert visit.blocked == {"http://127.0.0.1:9/pixel.png": "csp"}  # tried, and stopped before the network
        assert any("Content Security Policy" in str(entry.get("text")) for entry in visit.log)


def test_browser_helper_fails_without_chromium(monkeypatch: pytest.MonkeyPatch) -> None:
    import chromium

    monkeypatch.setattr(chromium.shutil, "which", lambda name: None)
    for ci in ("true", ""):  # in CI and on a developer's machine alike: a missing browser is no green run
        monkeypatch.setenv("CI", ci)
        with pytest.raises(pytest.fail.Exception, match="headless Chromium is not installed"):
            chromium.chromium_path()


def test_the_scale_benchmark_builds_its_synthetic_fleet(tmp_path: Path) -> None:
    from benchmark_scripts import benchmark_script

    with benchmark_script("history_scale") as script:
        fleet = script.synthetic(8, 20)
        assert len(fleet.series) == 8 and fleet.points == 160
        assert len(fleet.changes) == 2 and len(fleet.profile_diffs) == 2  # the first test's step, on both classes
        build = script.measure(8, 20, 1, tmp_path)
        assert (build.points, build.files) == (160, 2 + 2 + 2 + 1)  # assets, two pages, two diffs, the index
        assert script.growth([1, 2, 4], [3, 6, 12]) == pytest.approx(1.0)
        # the same points as the sessions that recorded them, for the stores: a run per device class and commit
        runs = script.runs_of(fleet)
        assert len(runs) == 2 * 20 and {len(r.values) for r in runs} == {4}
        assert sum(v.profile_diff is not None for r in runs for v in r.values) == 2


def test_the_detectors_change_points_are_drawn_at_their_commits(tmp_path: Path) -> None:
    """End to end with the real detector: a planted step is marked at its commit; a flat series has no mark."""
    from pytest_gpuperf.history.detect import find_changes

    stepped, flat = series(ATTN, step_at=30, step=0.15), series(CONV)
    changes = [c for s in (stepped, flat) for c in find_changes(s)]
    assert [(c.key, c.first_bad) for c in changes] == [(stepped.key, commit(30))]
    index = build_site([stepped, flat], changes, tmp_path / "site")
    rows = tags(index.read_text(), "tr")[1:]
    assert [(row["data-test"], row["data-kind"]) for row in rows] == [(ATTN, "regression"), (CONV, "none")]
    pages = {p.name: p.read_text() for p in (index.parent / "series").glob("*.html")}
    attn = next(html for name, html in pages.items() if "test_attn" in name)
    conv = next(html for name, html in pages.items() if "test_conv" in name)
    assert f"first bad {commit(30)}" in attn and f"last good {commit(29)}" in attn
    assert 'class="change ' not in conv


def test_gpuperf_history_dashboard_from_a_real_store_in_the_browser(tmp_path: Path, store_url: str) -> None:
    """The command on SQLite and on PostgreSQL: the planted step on screen, offline, its profile diff linked."""
    from cli_helpers import run

    from pytest_gpuperf.history.model import RecordedValue, RunRecord
    from pytest_gpuperf.history.store import open_store

    stepped, flat = series(ATTN, step_at=30, step=0.15), series(CONV)
    diff = to_json(cpu_extra_op_diff())
    with open_store(store_url) as store:
        for i in range(RUNS):
            values = tuple(
                RecordedValue(s.key.test, "default", "time.p50", s.points[i].value, "ns", p10=s.points[i].p10,
                              p90=s.points[i].p90, samples=60, profile_diff=diff if s is stepped and i == 30 else None)
                for s in (stepped, flat)
            )  # fmt: skip
            p = stepped.points[i]
            store.record(RunRecord(f"run-{i}", p.commit, "main", p.started_at, "runner-1", H100, "baseline", {},
                                   values, commit_date=p.commit_date, baseline_update=i == 12))  # fmt: skip
    code, _, err = run("history", "dashboard", "--history", store_url, "--out", str(tmp_path / "site"))
    assert code == 0, err
    root = tmp_path / "site"
    with browser(tmp_path) as chrome:
        visit = chrome.visit((root / "index.html").as_uri())
        assert _offline(visit.requests, root) == [] and _no_errors(visit.log) == []
        kinds = chrome.evaluate("Array.from(document.querySelectorAll('#series tbody tr')).map(r => r.dataset.kind)")
        assert kinds == ["regression", "none"]
        href = chrome.evaluate("document.querySelector('#series tbody tr a').getAttribute('href')")
        visit = chrome.visit((root / href.split("#")[0]).as_uri())
        assert _offline(visit.requests, root) == [] and _no_errors(visit.log) == []
        labels = chrome.evaluate("Array.from(document.querySelectorAll('.change-label')).map(t => t.textContent)")
        assert len(labels) == 1 and labels[0].startswith(f"{commit(29)[:10]}..{commit(30)[:10]} +")
        assert chrome.evaluate("document.querySelectorAll('svg.chart g.update').length") == 1
        diff_href = chrome.evaluate(
            "document.querySelector('a > text.change-label').parentElement.getAttribute('href')"
        )
        visit = chrome.visit((root / "series" / diff_href).resolve().as_uri())
        assert _offline(visit.requests, root) == []
        assert "aten::gelu" in chrome.evaluate("document.querySelector('section.why table').textContent")


def test_an_event_is_marked_on_each_statistic_listed_once_and_the_page_switches_statistic(tmp_path: Path) -> None:
    p50 = series(MLP, step_at=10, step=0.08)
    p90 = series(MLP, "time.p90", step_at=10, step=0.09)
    supporting = change_at(p90, 10, ChangeKind.REGRESSION)
    event = dataclasses.replace(change_at(p50, 10, ChangeKind.REGRESSION), supporting=(supporting,))
    index = build_site([p50, p90], [event], tmp_path / "site")
    page = next((tmp_path / "site" / "series").glob("*.html")).read_text()
    charts = re.findall(r'<svg class="chart".*?</svg>', page, flags=re.S)
    assert [len(re.findall(r'<rect class="change regression"', c)) for c in charts] == [1, 1]  # marked on both
    table = re.search(r'<table class="changes">.*?</table>', page, flags=re.S)
    assert table is not None and table.group(0).count("<tr class=") == 1  # listed once
    assert "time.p90 +" in table.group(0)
    switch = re.search(r'<nav class="statistics".*?</nav>', page, flags=re.S)
    assert switch is not None
    assert [o["value"] for o in tags(switch.group(0), "option")] == ["stat-time.p50", "stat-time.p90"]
    assert [s["src"] for s in tags(page, "script")] == ["../assets/dashboard.js"]
    assert index.read_text().count("<tr class=") == 1


def test_a_pending_change_says_so_in_its_hover_title() -> None:
    from pytest_gpuperf.history.dashboard.svg import change_title

    key = SeriesKey("t.py::test_a", "default", "time.p50", "cpu", "main")
    change = ChangePoint(key, "a" * 40, "b" * 40, 48, 1.0, 1.3, 0.3, 0.2, 0.4, 0.001, ChangeKind.REGRESSION, 2)
    assert "pending" not in change_title(change)
    assert "regression, pending: too few runs at a level yet on cpu" in change_title(
        dataclasses.replace(change, pending=True)
    )


# -- many tests, deterministic series, p-values ----------------------------------------------------


def fleet_of(tests: int) -> tuple[list[Series], list[ChangePoint]]:
    """``tests`` measurements with long pydantic-style ids on two device classes: every third with a time regression,
    every fifth with a memory step (its latest change where it is later than the time's)."""
    all_series, changes = [], []
    for i in range(tests):
        test = f"tests/benchmarks/test_model_{i:02d}.py::test_validate_nested_model_with_defaults[case-{i}]"
        device_class = H100 if i % 2 else A100
        timing = series(test, device_class=device_class, step_at=25 if i % 3 == 0 else None, step=0.12)
        memory = series(test, "memory.peak_allocated", device_class=device_class, base=3.0 * 2**30, unit="bytes",
                        band=False, step_at=30 if i % 5 == 0 else None, step=0.25)  # fmt: skip
        all_series += [timing, memory]
        changes += [change_at(timing, 25, ChangeKind.REGRESSION)] if i % 3 == 0 else []
        changes += [change_at(memory, 30, ChangeKind.REGRESSION)] if i % 5 == 0 else []
    return all_series, changes


def test_the_index_of_50_tests_fits_a_1400_px_window(tmp_path: Path) -> None:
    """Seven columns, ids that wrap at their folders, test and parameters: every column is on screen."""
    index = build_site(*fleet_of(50), tmp_path / "site", title="fleet")
    with browser(tmp_path) as chrome:
        chrome.screenshot(1400, 1000)  # the window's size
        chrome.visit(index.as_uri())
        width = chrome.evaluate("document.documentElement.clientWidth")
        assert chrome.evaluate("document.documentElement.scrollWidth") == width
        edges = chrome.evaluate(
            "[...document.querySelectorAll('#series th')].map(th => th.getBoundingClientRect().right)"
        )
        assert len(edges) == 7 and max(edges) <= width
        assert chrome.evaluate("document.querySelectorAll('#series tbody tr').length") == 50


def test_the_trend_draws_the_statistic_whose_change_its_band_marks(tmp_path: Path) -> None:
    """A memory step with a flat time: the row's line is the memory's, with its step under the band."""
    timing = series(ATTN)
    memory = series(ATTN, "memory.peak_allocated", base=2.0**30, unit="bytes", band=False, step_at=30, step=0.5)
    index = build_site([timing, memory], [change_at(memory, 30, ChangeKind.REGRESSION)], tmp_path / "site")
    row = re.findall(r"<tr class=.*?</tr>", index.read_text(), flags=re.S)[0]
    spark = re.search(r'<svg class="spark".*?</svg>', row, flags=re.S)
    assert spark is not None and "<title>memory.peak_allocated: 40 runs</title>" in spark.group(0)
    heights = [float(xy.split(",")[1]) for xy in tags(spark.group(0), "polyline")[0]["points"].split()]  # type: ignore[union-attr]
    assert min(heights[30:]) < max(heights[:30]) - 10  # the step: higher values, drawn higher
    assert '<span class="statistic">memory.<wbr>peak_allocated</span>' in row  # the line is not the median's
    assert "time.p50 1.2" in row  # the latest median column stays the median's


def test_a_p_value_below_what_the_permutations_reach_is_printed_as_that_bound(tmp_path: Path) -> None:
    """Four runs a side: the F test keeps the step, its p-value scaled onto alpha far below 1/400."""
    from pytest_gpuperf.history.detect import find_changes
    from pytest_gpuperf.history.render import render_table

    short = series(MLP, runs=8, step_at=4, step=0.2, band=False)
    [change] = find_changes(short)
    assert change.p_value < change.p_floor == 1 / 400 and change.p_text == "< 0.0025"
    index = build_site([short], [change], tmp_path / "site")
    page = next((tmp_path / "site" / "series").glob("*.html")).read_text()
    assert "p &lt; 0.0025" in page and "<td>&lt; 0.0025</td>" in page  # the band's title, the table
    assert f"{change.p_value:.2g}" not in page and f"{change.p_value:.1e}" not in page
    assert "p &lt; 0.0025" in index.read_text()  # the index's latest change, in its title
    assert "< 0.0025" in render_table([change]) and f"{change.p_value:.1e}" not in render_table([change])
