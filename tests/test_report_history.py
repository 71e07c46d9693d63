from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest
from matplotlib import image as mpl_image
from test_report_helpers import ENV, samples

from pytest_gpuperf.baseline import BaselineStore, entry_from_measurement
from pytest_gpuperf.model import BaselineEntry, Measurement, Provenance
from pytest_gpuperf.report.history import HistoryError, collect_history, find_steps, plot_history, render_history

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


@pytest.fixture
def history_repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """Five commits: test_a steps up at the third and stays; test_b spikes once; test_c rises at the end."""
    repo = git.Repo.init(tmp_path / "project")
    root = Path(repo.working_tree_dir or "") / "baselines"
    store = BaselineStore(root)
    shas = []
    plan = [
        {"a": 1_000_000.0, "b": 100_000.0},
        {"a": 1_020_000.0, "b": 200_000.0},
        {"a": 1_500_000.0, "b": 100_500.0},
        {"a": 1_490_000.0},
        {"c": 10_000.0},
        {"c": 20_000.0},
    ]
    for n, values in enumerate(plan, start=1):
        entries = [_entry(f"tests/test_{k}.py::test_{k}", v, n) for k, v in values.items()]
        store.update(ENV.device_class, entries)
        shas.append(_commit(repo, n, f"baselines {n}"))
    (root.parent / "README.md").write_text("not a baseline\n")
    _commit(repo, 7, "docs only")
    return root, shas


def test_history_follows_each_entry_and_marks_lasting_steps(history_repo: tuple[Path, list[str]]) -> None:
    root, shas = history_repo
    history = collect_history(root)
    assert history.commits == 6  # the docs-only commit does not touch the folder
    by_key = {s.key.split("::")[1]: s for s in history.series}
    assert set(by_key) == {"test_a", "test_b", "test_c"}

    a = by_key["test_a"]
    assert [p.commit for p in a.points] == shas[:4]  # later commits did not change test_a
    assert [p.value_ns for p in a.points] == pytest.approx([1e6, 1.02e6, 1.5e6, 1.49e6])
    (step,) = a.steps
    assert step.index == 2 and step.commit == shas[2] and step.confirmed
    assert step.before_ns == pytest.approx(1e6)
    assert step.change == pytest.approx(0.495)

    b = by_key["test_b"]
    assert len(b.points) == 3
    assert b.steps == ()  # the spike at commit 2 came back: not a step

    (c_step,) = by_key["test_c"].steps
    assert c_step.commit == shas[5] and not c_step.confirmed
    assert a.device_class == ENV.device_class


def test_render_and_plot(history_repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, shas = history_repo
    history = collect_history(root, match="test_a")
    text = render_history(history)
    assert text.startswith("1 measurement over 6 commits (p50)")
    step_line = next(line for line in text.splitlines() if "step" in line and "began" in line)
    assert step_line.split()[0] == shas[2][:12]
    assert "▲ step +49.5% began here" in step_line
    assert "1.500 ms" in step_line and "+47.1%" in step_line
    png = plot_history(collect_history(root), tmp_path / "plots" / "history.png")
    pixels = mpl_image.imread(png)
    assert pixels.shape[0] > 500  # three panels
    # The step's dashed line is drawn in red.
    red = (abs(pixels[..., 0] - 0xD6 / 255) < 0.05) & (pixels[..., 1] < 0.25) & (pixels[..., 2] < 0.25)
    assert red.sum() > 50


def test_unreadable_versions_are_skipped_and_named(history_repo: tuple[Path, list[str]]) -> None:
    root, _ = history_repo
    broken = root / ENV.device_class / "broken.json"
    broken.write_text("{not json")
    _commit(git.Repo(root.parent), 8, "a broken file")
    history = collect_history(root)
    assert len(history.skipped) == 1
    assert "broken.json" in history.skipped[0]
    assert "skipped:" in render_history(history)


def test_a_deleted_folder_still_has_its_history(history_repo: tuple[Path, list[str]]) -> None:
    root, _ = history_repo
    repo = git.Repo(root.parent)
    repo.git.rm("-r", "-q", "baselines")
    repo.index.commit("drop the baselines", author=ACTOR, committer=ACTOR)
    shutil.rmtree(root)  # lock files the store left, which git ignores
    history = collect_history(root)
    assert history.commits == 7
    assert len(history.series) == 3


def test_outside_git_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="not inside a git repository") as info:
        collect_history(tmp_path)
    assert info.value.path == tmp_path


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([100, 101, 99, 100], []),
        ([100, 130, 100, 100], []),  # one outlier
        ([100, 130, 131, 129], [(1, 100, 130.5, True)]),
        ([100, 100, 100, 150], [(3, 100, 150, False)]),
        ([100, 80, 79, 120, 121], [(1, 100, 79.5, True), (3, 79.5, 120.5, True)]),
        ([100, 105, 111, 116, 122], [(2, 100, 113.5, True)]),  # slow drift adds up to a step
    ],
)
def test_find_steps(values: list[float], expected: list[tuple[int, float, float, bool]]) -> None:
    assert find_steps(values, [None] * len(values), threshold=0.1) == expected


def test_noise_widens_the_tolerance() -> None:
    assert find_steps([100, 125, 126], [0.3, 0.3, 0.3], threshold=0.1) == []
    assert find_steps([100, 125, 126], [None, None, None], threshold=0.1) == [(1, 100, 125.5, True)]
