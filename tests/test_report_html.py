from __future__ import annotations

import base64
import dataclasses
import os
import re
import shutil
from pathlib import Path

import git
import numpy as np
import pytest
from chromium import browser, run_chromium
from matplotlib import image as mpl_image
from test_report_helpers import ENV, device_session, make_session

from pytest_gpuperf.baseline import BaselineStore, entry_from_measurement
from pytest_gpuperf.history.baselines_view import baseline_history, trends
from pytest_gpuperf.model import Measurement, MeasurementResult, Provenance, SessionResults, Verdict
from pytest_gpuperf.report import write_reports
from pytest_gpuperf.report.html import (
    central_range,
    device_figure,
    distribution_figure,
    render_html,
    trend_figure,
    zoom_limits,
)
from pytest_gpuperf.report.results_json import load_results, write_results
from tests.verdict_helpers import compare


def test_page_is_self_contained_with_one_figure_per_measurement() -> None:
    session = make_session()
    page = render_html(session)
    assert page.startswith("<!DOCTYPE html>")
    # Nothing is fetched: no external scripts, styles, fonts or images.
    assert not re.search(r"""(src|href)=["'](?!data:)""", page)
    assert "http://" not in page and "https://" not in page
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(session.results)
    assert all(base64.b64decode(img).startswith(b"\x89PNG\r\n\x1a\n") for img in images)
    assert page.count('<tr class="regression">') == 3  # summary row + time and memory comparisons
    assert "Top operators" in page and "aten::mm" in page
    assert "unstable: GPU clock throttled (thermal)" in page


def test_text_is_escaped() -> None:
    session = make_session()
    first = session.results[0]
    hostile = dataclasses.replace(first.measurement, test_id="tests/t.py::test_x[<script>alert(1)</script>]")
    page = render_html(dataclasses.replace(session, results=(dataclasses.replace(first, measurement=hostile),)))
    assert "<script>" not in page
    assert "&lt;script&gt;" in page


def test_chromium_renders_table_and_figures(tmp_path: Path) -> None:
    session = make_session()
    page = write_reports(session, {"html": tmp_path / "report.html"}).written[0]
    dom = run_chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<table id="summary">' in dom.stdout
    assert dom.stdout.count('<section class="measurement') == len(session.results)

    shot = tmp_path / "shot.png"
    done = run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = mpl_image.imread(shot)[..., :3]
    # The regression row's pink background and the "now" samples' blue must both be on screen:
    # the first proves the style sheet applied, the second that an embedded figure was decoded.
    pink = np.all(np.abs(pixels - np.array([0xFD, 0xE2, 0xE1]) / 255) < 0.02, axis=-1)
    blue = np.all(np.abs(pixels - np.array([0x1F, 0x77, 0xB4]) / 255) < 0.08, axis=-1)
    assert pink.sum() > 500
    assert blue.sum() > 100


def test_a_run_that_could_not_judge_says_so_first() -> None:
    """As the terminal's last line and the PR comment's first: unstable, not gated, not comparable are not a pass."""
    page = render_html(make_session())
    banner = re.search(r'<p class="unjudged">([^<]*)</p>', page)
    assert banner is not None and banner.start() < page.index('<p class="summary">')
    assert banner.group(1).startswith("4 of 8 measurements could not be judged: 1 unstable, 1 not gated")
    assert "They are not a pass" in banner.group(1)
    unjudged = (Verdict.UNSTABLE, Verdict.NOT_GATED, Verdict.NOT_RESOLVED, Verdict.NOT_COMPARABLE)
    judged = make_session()
    judged = dataclasses.replace(judged, results=tuple(r for r in judged.results if r.verdict not in unjudged))
    assert 'class="unjudged"' not in render_html(judged)


LONG_IDS = (
    "tests/benchmarks/test_model_schema_generation_recursive.py::test_recursive_discriminated_union_with_base_model",
    "tests/benchmarks/test_discriminated_unions.py::test_efficiency_with_highly_nested_examples[pydantic-strict]",
)


def test_the_summary_fits_a_1400_px_window_with_long_test_ids(tmp_path: Path) -> None:
    """pydantic's ids are over 100 characters: they wrap at their folders and test, the verdict stays on screen."""
    session = make_session()
    results = tuple(dataclasses.replace(r, measurement=dataclasses.replace(r.measurement, test_id=LONG_IDS[i % 2]))
                    for i, r in enumerate(session.results))  # fmt: skip
    page = tmp_path / "report.html"
    page.write_text(render_html(dataclasses.replace(session, results=results)))
    with browser(tmp_path) as b:
        b.screenshot(1400, 1000)  # sets the window's size
        b.visit(page.as_uri())
        overflow = b.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        right = b.evaluate("Math.max(...[...document.querySelectorAll('#summary th')]"
                           ".map(th => th.getBoundingClientRect().right))")  # fmt: skip
        width = b.evaluate("document.documentElement.clientWidth")
    assert overflow == 0 and right <= width


TEST_ID = "tests/perf/test_attention.py::test_sdpa[bf16-seqlen8192]"
ACTOR = git.Actor("gpuperf tests", "tests@example.invalid")


def _measured(center: float, n: int, seed: int, extra: tuple[float, ...] = ()) -> Measurement:
    spread = np.random.default_rng(seed).normal(0.0, 0.015, n)
    values = tuple(float(center * (1 + e)) for e in spread) + extra
    rounds = tuple(float(np.median(values[i : i + 10])) for i in range(0, n, 10))
    return Measurement(
        test_id=TEST_ID, name="default", samples_ns=values, calls_per_sample=8, device="cuda:0", timer="cuda_event",
        round_medians_ns=rounds, precision=0.006,
    )  # fmt: skip


def shifted_session(tmp_path: Path) -> tuple[SessionResults, Path]:
    """Baselines of ~207 us in git (three versions), a run of ~331 us with one 12 ms sample.

    Judged by the real gate and read back from a real results file, as the plugin writes it.
    """
    repo = git.Repo.init(tmp_path / "project")
    root = tmp_path / "project" / "baselines"
    store = BaselineStore(root)
    base = None
    for n, center in enumerate((205_000.0, 209_500.0, 207_000.0), start=1):
        base = entry_from_measurement(
            _measured(center, 60, seed=n), ENV, Provenance(), noise=0.01, recorded_at=f"2026-01-0{n}T00:00:00+00:00"
        )
        store.update(ENV.device_class, [base])
        repo.git.add(A=True)
        date = f"{1_767_268_800 + n * 86_400} +0000"
        repo.index.commit(f"baselines {n}", author=ACTOR, committer=ACTOR, author_date=date, commit_date=date)
    assert base is not None
    now = _measured(331_000.0, 59, seed=9, extra=(12_000_000.0,))
    comparisons = compare(now, base, env=ENV)
    assert comparisons[0].verdict is Verdict.REGRESSION
    session = SessionResults((MeasurementResult(now, comparisons, base),), ENV, Provenance(), "baseline", "2026-01-05")
    return load_results(write_results(tmp_path / "results.json", session)), root


def test_a_lone_outlier_cannot_hide_the_shift(tmp_path: Path) -> None:
    session, _ = shifted_session(tmp_path)
    (result,) = session.results
    timing = result.comparisons[0]
    assert timing.baseline is not None and timing.threshold is not None
    fig = distribution_figure(result)
    fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()  # microseconds
    # the axis holds both modes and the threshold band, not the 12 ms sample
    assert lo < timing.baseline * (1 - timing.threshold) / 1e3 and timing.current / 1e3 < hi < 1_000
    # the two statistics stand far apart on screen: over a third of the plot's width
    y = 1.5
    x_base = ax.transData.transform((timing.baseline / 1e3, y))[0]
    x_now = ax.transData.transform((timing.current / 1e3, y))[0]
    assert x_now - x_base > ax.bbox.width / 3
    # the outlier is not hidden: a triangle on the edge and its value
    assert [t.get_text() for t in ax.texts] == ["1 sample\nup to 12.00 ms"]
    assert ax.get_xlabel() == "time per call (us), zoomed to the bulk of the samples"
    # the threshold band is drawn around the baseline's statistic
    (band,) = [p for p in ax.patches if str(p.get_label()).startswith("threshold")]
    left, right = band.get_bbox().x0, band.get_bbox().x1
    assert (left, right) == pytest.approx(
        (timing.baseline * (1 - timing.threshold) / 1e3, timing.baseline * (1 + timing.threshold) / 1e3)
    )
    assert left < timing.baseline / 1e3 < right < timing.current / 1e3


def test_central_range_ignores_a_lone_outlier_at_any_count() -> None:
    for n in (5, 12, 60, 1000):
        values = [100.0 + i % 7 for i in range(n)] + [10_000.0]
        lo, hi = central_range(values)
        assert lo >= 100.0 and hi < 130.0, n  # the fences lie near the bulk, far from 10000
    assert central_range([5.0, 5.0, 5.0]) == (5.0, 5.0)  # no spread: the limits come from the marks and padding
    assert zoom_limits([[5.0, 5.0]], [5.0]) == pytest.approx((4.95, 5.05))


def test_trend_chart_per_measurement_from_the_baselines_history(tmp_path: Path) -> None:
    session, root = shifted_session(tmp_path)
    history = trends(baseline_history(root))
    page = render_html(session, history)
    assert page.count('<figure class="trend">') == 1
    assert "3 baseline versions, 0 lasting steps" in page
    fig = trend_figure(history.trends[0], session.results[0].measurement.stats.median_ns, "p50")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == 4 and labels[-1] == "now"
    (now,) = [line for line in ax.lines if line.get_label() == "now"]
    assert now.get_ydata()[0] == pytest.approx(session.results[0].measurement.stats.median_ns / 1e3)
    # without a history, or for another device class, no trend
    assert '<figure class="trend">' not in render_html(session)
    other = dataclasses.replace(session, environment=dataclasses.replace(ENV, device_class="cpu-other"))
    assert '<figure class="trend">' not in render_html(other, history)


def test_chromium_renders_the_shift_and_the_trend(tmp_path: Path) -> None:
    session, root = shifted_session(tmp_path)
    page = write_reports(session, {"html": tmp_path / "report.html"}, history=trends(baseline_history(root))).written[0]
    dom = run_chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('<figure class="distribution">') == 1 and dom.stdout.count('<figure class="trend">') == 1
    shot = tmp_path / "shot.png"
    done = run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1100,1400", page.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = mpl_image.imread(shot)[..., :3]
    blue = np.all(np.abs(pixels - np.array([0x1F, 0x77, 0xB4]) / 255) < 0.08, axis=-1)
    assert blue.sum() > 100
    keep = os.environ.get("GPUPERF_KEEP_SCREENSHOT")
    if keep:  # for a person to look at
        shutil.copyfile(shot, keep)


def test_page_and_comment_list_the_same_software_the_numbers_were_measured_with() -> None:
    from pytest_gpuperf.report.markdown import render_comment

    session = make_session()
    page, comment = render_html(session), render_comment(session)
    for name, value in (
        ("CPU", "AMD EPYC 9654"),
        ("torch", "2.13.0"),
        ("platform", "Linux-6.8-x86_64"),
        ("clocks", "locked"),
    ):
        assert f"<li><b>{name}</b>: {value}</li>" in page
        assert f"- **{name}**: {value}" in comment


def test_clock_and_power_are_drawn_beside_the_samples_where_nvml_read_them() -> None:
    session = device_session()
    page = render_html(session)
    assert page.count('<figure class="device">') == 1
    assert "NVML beside the samples, medians: SM clock 1957 MHz, memory clock 2619 MHz, power 619 W, " \
           "temperature 61 °C" in page  # fmt: skip
    figure = device_figure(session.results[0].measurement)
    assert figure is not None
    assert [ax.get_ylabel() for ax in figure.axes] == ["time per call (ms)", "SM clock (MHz)", "power (W)"]
    assert "20 NVML readings" in figure.axes[-1].get_xlabel()  # 40 samples, half of them read
    without = dataclasses.replace(session.results[0].measurement, device_state=None)
    assert device_figure(without) is None
    assert '<figure class="device">' not in render_html(make_session())
