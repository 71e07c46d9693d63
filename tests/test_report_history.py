"""The baselines' git history: read as a source of the history, its changes found by history/detect.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest
from matplotlib import image as mpl_image
from test_report_helpers import ENV, samples

from pytest_gpuperf.baseline import BaselineStore, entry_from_measurement
from pytest_gpuperf.errors import HistoryError
from pytest_gpuperf.history.baselines_git import read_baselines
from pytest_gpuperf.history.baselines_view import baseline_history, history_or_none, trends
from pytest_gpuperf.model import BaselineEntry, Measurement, Provenance
from pytest_gpuperf.report.history import plot_history, render_history

ACTOR = git.Actor("gpuperf tests", "tests@example.invalid")


def _entry(test_id: str, center: float, n: int) -> BaselineEntry:
    m = Measurement(
        test_id=test_id,
        name="default",
        samples_ns=samples(center),
        calls_per_sample=4,
        device="cuda:0",
        timer="cuda_event",
        round_medians_ns=(center,),
    )
    return entry_from_measurement(
        m, ENV, Provenance(commit=None), noise=0.02, recorded_at=f"2026-01-0{n}T00:00:00+00:00"
    )


def _commit(repo: git.Repo, n: int, message: str) -> str:
    repo.git.add(A=True)
    date = f"{1_767_268_800 + n * 86_400} +0000"  # git's raw format: 2026-01-0n 12:00 UTC
    return repo.index.commit(message, author=ACTOR, committer=ACTOR, author_date=date, commit_date=date).hexsha


def _committed(folder: Path, plan: list[dict[str, float]]) -> tuple[git.Repo, Path, list[str]]:
    """A repository with one commit per step of ``plan`` (test letter -> median), and their hashes."""
    repo = git.Repo.init(folder)
    root = Path(repo.working_tree_dir or "") / "baselines"
    store = BaselineStore(root)
    shas = []
    for n, values in enumerate(plan, start=1):
        entries = [_entry(f"tests/test_{k}.py::test_{k}", v, n) for k, v in values.items()]
        store.update(ENV.device_class, entries)
        shas.append(_commit(repo, n, f"baselines {n}"))
    return repo, root, shas


@pytest.fixture
def history_repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """Six commits: test_a steps up at the third and stays; test_b spikes once; test_c rises at the end."""
    plan = [
        {"a": 1_000_000.0, "b": 100_000.0},
        {"a": 1_020_000.0, "b": 200_000.0},
        {"a": 1_500_000.0, "b": 100_500.0},
        {"a": 1_490_000.0},
        {"c": 10_000.0},
        {"c": 20_000.0},
    ]
    repo, root, shas = _committed(tmp_path / "project", plan)
    (root.parent / "README.md").write_text("not a baseline\n")
    _commit(repo, 7, "docs only")
    return root, shas


@pytest.fixture
def stepped_repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """Ten commits: test_a steps up by half at the sixth and stays; test_b spikes once and comes back."""
    plan = [
        {"a": (1_000_000.0 if n < 6 else 1_500_000.0) * (1 + 0.002 * (n % 3)),
         "b": 300_000.0 if n == 4 else 100_000.0 * (1 + 0.002 * (n % 2))}
        for n in range(1, 11)
    ]  # fmt: skip
    _, root, shas = _committed(tmp_path / "stepped", plan)
    return root, shas


def test_the_git_reader_lists_each_entry_s_versions(history_repo: tuple[Path, list[str]]) -> None:
    root, shas = history_repo
    log = read_baselines(root)
    assert log.commits == 6  # the docs-only commit does not touch the folder
    by_entry = {key.split("::")[1]: versions for (_, key), versions in log.by_entry().items()}
    assert set(by_entry) == {"test_a", "test_b", "test_c"}
    assert [v.commit for v in by_entry["test_a"]] == shas[:4]  # later commits did not change test_a
    assert [v.entry.stats.median_ns for v in by_entry["test_a"]] == pytest.approx([1e6, 1.02e6, 1.5e6, 1.49e6])
    assert len(by_entry["test_b"]) == 3 and by_entry["test_a"][0].device_class == ENV.device_class


def test_the_history_s_detector_marks_the_lasting_step(stepped_repo: tuple[Path, list[str]]) -> None:
    root, shas = stepped_repo
    history = baseline_history(root)
    by_test = {s.key.test.split("::")[1]: s for s in history.series}
    assert set(by_test) == {"test_a", "test_b"} and history.too_short == ()
    assert by_test["test_a"].key.statistic == "time.p50" and len(by_test["test_a"].points) == 10
    assert all(p.ci_low is not None for p in by_test["test_a"].points)  # each version weighed by its samples
    (step,) = history.changes  # test_b's spike came back: not a change
    assert step.key == by_test["test_a"].key and step.first_bad == shas[5] and step.last_good == shas[4]
    assert step.change == pytest.approx(0.5, abs=0.01)
    # --threshold: a change smaller than it is not shown
    assert baseline_history(root, threshold=0.6).changes == ()


def test_render_and_plot(stepped_repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, shas = stepped_repo
    text = render_history(trends(baseline_history(root, match="test_a")))
    assert text.startswith("1 measurement over 10 commits (p50)")
    step_line = next(line for line in text.splitlines() if "began here" in line)
    assert step_line.split()[0] == shas[5][:12]
    assert "▲ step +49.9% began here" in step_line and "1.500 ms" in step_line
    png = plot_history(trends(baseline_history(root)), tmp_path / "plots" / "history.png")
    pixels = mpl_image.imread(png)
    assert pixels.shape[0] > 400  # two panels
    # The step's dashed line is drawn in red.
    red = (abs(pixels[..., 0] - 0xD6 / 255) < 0.05) & (pixels[..., 1] < 0.25) & (pixels[..., 2] < 0.25)
    assert red.sum() > 50


def test_a_series_too_short_to_tell_is_named(history_repo: tuple[Path, list[str]]) -> None:
    root, _ = history_repo
    history = baseline_history(root)
    assert history.changes == () and len(history.too_short) == 3 and history.fewest == 6
    assert "too few versions to find a change (fewer than 6): tests/test_a.py::test_a::default" in render_history(
        trends(history)
    )


def test_unreadable_versions_are_skipped_and_named(history_repo: tuple[Path, list[str]]) -> None:
    root, _ = history_repo
    broken = root / ENV.device_class / "broken.json"
    broken.write_text("{not json")
    _commit(git.Repo(root.parent), 8, "a broken file")
    history = trends(baseline_history(root))
    assert len(history.skipped) == 1
    assert "broken.json" in history.skipped[0]
    assert "skipped:" in render_history(history)


def test_a_deleted_folder_still_has_its_history(history_repo: tuple[Path, list[str]]) -> None:
    root, _ = history_repo
    repo = git.Repo(root.parent)
    repo.git.rm("-r", "-q", "baselines")
    repo.index.commit("drop the baselines", author=ACTOR, committer=ACTOR)
    shutil.rmtree(root)  # lock files the store left, which git ignores
    history = baseline_history(root)
    assert history.commits == 7
    assert len(history.series) == 3


def test_outside_git_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="not inside a git repository") as info:
        baseline_history(tmp_path)
    assert info.value.path == tmp_path
    assert history_or_none(tmp_path) is None  # a report without a history draws no trend
