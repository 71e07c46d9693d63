"""Build the site: plan the pages, render each, write every file atomically, remove pages of series gone.

The output is a plain folder (``index.html``, ``series/``, ``diffs/``, ``assets/``) that
works from the disk, an artifact or any static file server: every script and style is a
file in it, and no page asks for anything outside it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import resources
from pathlib import Path

from pytest_gpuperf.files import is_temp_file, write_atomic
from pytest_gpuperf.history.dashboard.diff import render_diff
from pytest_gpuperf.history.dashboard.frame import SCRIPT_FILE, STYLE_FILE
from pytest_gpuperf.history.dashboard.group import render_group
from pytest_gpuperf.history.dashboard.index import render_index
from pytest_gpuperf.history.dashboard.layout import ASSETS_DIR, DIFFS_DIR, SERIES_DIR, plan
from pytest_gpuperf.history.model import ChangePoint, Series

INDEX = "index.html"
WRITERS = 8


def build_site(
    series: Sequence[Series],
    changes: Sequence[ChangePoint],
    out_dir: Path,
    *,
    title: str = "Performance history",
    profile_diffs: Mapping[str, Mapping[str, object]] | None = None,
) -> Path:
    """Write the dashboard of ``series`` and their ``changes`` into ``out_dir``; returns the index page's path.

    ``profile_diffs`` maps ``f"{run_id}/{test}::{measurement}"`` to the results-file JSON
    of that run's ProfileDiff; a point marked ``has_profile_diff`` links to its page.
    Pages of series no longer given are removed from ``series/`` and ``diffs/`` (nothing
    else in ``out_dir`` is touched). DashboardError names input the site cannot show;
    WriteError a file that could not be written.
    """
    out = Path(out_dir)
    site = plan(series, changes, profile_diffs)
    with _Writer(out) as writer:
        assets = resources.files(__package__)
        for name in (STYLE_FILE, SCRIPT_FILE):
            writer.put(f"{ASSETS_DIR}/{name}", assets.joinpath(f"assets/{name}").read_text("utf-8"))
        for group in site.groups:
            writer.put(group.path, render_group(group, site, title))
        for page in site.diffs.values():
            writer.put(page.path, render_diff(page, title))
        written = writer.finish()
    # the index last: while a build runs, the old index links only pages that exist
    written.add(write_atomic(out / INDEX, render_index(site, title)))
    _remove_stale(out, written)
    return out / INDEX


class _Writer:
    """``write_atomic`` on a few threads: each file's fsync waits on the disk, not on the next page's rendering.

    At most ``2 * WRITERS`` rendered pages wait in memory, so a large site is never held whole.
    """

    def __init__(self, out: Path) -> None:
        self._out = out
        self._pool = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="gpuperf-dashboard")
        self._pending: deque[Future[Path]] = deque()
        self._written: set[Path] = set()

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def put(self, relative: str, text: str) -> None:
        if len(self._pending) >= 2 * WRITERS:
            self._written.add(self._pending.popleft().result())  # a WriteError surfaces here
        self._pending.append(self._pool.submit(write_atomic, self._out / relative, text))

    def finish(self) -> set[Path]:
        while self._pending:
            self._written.add(self._pending.popleft().result())
        return self._written


def _remove_stale(out: Path, written: set[Path]) -> None:
    """Pages a previous build wrote for series that are gone; only this builder's folders and pages."""
    for folder in (SERIES_DIR, DIFFS_DIR):
        directory = out / folder
        if not directory.is_dir():
            continue
        for path in directory.glob("*.html"):
            if path not in written and not is_temp_file(path):
                path.unlink(missing_ok=True)
