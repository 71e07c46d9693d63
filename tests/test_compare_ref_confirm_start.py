"""Confirmation workers that cannot start: one note naming the folder, no traceback, no change called."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.engines.compare_ref.confirm import ConfirmationPool
from pytest_gpuperf.errors import WorkerError
from pytest_gpuperf.workers.remote import WorkerLaunch
from pytest_gpuperf.workers.twins import Zygote


def _launch(tmp_path: Path, side: str) -> WorkerLaunch:
    return WorkerLaunch(
        cwd=tmp_path / "removed-checkout", import_roots=(), files=("test_x.py",), device="cpu", pin_cpu=None,
        basetemp=tmp_path / f"basetemp-{side}", log_path=tmp_path / "logs" / f"{side}.log",
    )  # fmt: skip


def test_a_worker_that_cannot_start_is_a_worker_error_naming_the_folder(tmp_path: Path) -> None:
    zygote = Zygote(tmp_path / "scratch")
    with pytest.raises(WorkerError, match=r"could not start a worker in .*removed-checkout"):
        zygote.fork(_launch(tmp_path, "head"))
    assert not (tmp_path / "scratch").exists()  # nothing started for it


def test_a_confirmation_whose_workers_cannot_start_says_so_once(tmp_path: Path) -> None:
    zygote = Zygote(tmp_path / "scratch")
    pool = ConfirmationPool(
        3, lambda j: _launch(tmp_path, f"head-{j}"), lambda j: _launch(tmp_path, f"base-{j}"), "main", zygote
    )
    result = pool.confirm("test_x.py::test_x", "default", MeasureSettings(), threshold=0.02)
    pool.close()
    zygote.close()
    assert result.ratios == [] and not result.usable()
    (note,) = result.problems
    assert note.startswith("confirmation workers did not start: could not start a worker in")
    assert result.attempted >= 3  # every pair of the first wave was tried
    assert not (tmp_path / "scratch" / "zygote.log").exists()  # no process started for workers that could not be
