from __future__ import annotations

import base64
import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpl_image
from test_report_helpers import make_session

from pytest_gpuperf.report.html import render_html, write_html

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("headless Chromium is not installed (Debian: apt-get install -y chromium)")


def _run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


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
    page = write_html(tmp_path / "report.html", session)
    dom = _run_chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert '<table id="summary">' in dom.stdout
    assert dom.stdout.count('<section class="measurement') == len(session.results)

    shot = tmp_path / "shot.png"
    done = _run_chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = mpl_image.imread(shot)[..., :3]
    # The regression row's pink background and the "now" samples' blue must both be on screen:
    # the first proves the style sheet applied, the second that an embedded figure was decoded.
    pink = np.all(np.abs(pixels - np.array([0xFD, 0xE2, 0xE1]) / 255) < 0.02, axis=-1)
    blue = np.all(np.abs(pixels - np.array([0x1F, 0x77, 0xB4]) / 255) < 0.08, axis=-1)
    assert pink.sum() > 500
    assert blue.sum() > 100
