"""Confirmation pairs' workers forked from the session's zygote: real processes, real pytest sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gpuperf.engines.compare_ref.confirm import ConfirmationPool
from pytest_gpuperf.errors import WorkerError
from pytest_gpuperf.workers.remote import RemoteSide, WorkerLaunch
from pytest_gpuperf.workers.twins import ForkedWorker, Zygote

pytestmark = pytest.mark.slow

# Written at collection: what the worker process that imported it looks like from inside.
REPORTER = """
import json, os, sys
from pathlib import Path

Path(os.environ["REPORT_DIR"], Path.cwd().name + ".json").write_text(json.dumps({
    "pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(), "path": sys.path,
    "own_module": __import__("side").NAME, "time_only": os.environ.get("GPUPERF_WORKER_TIME_ONLY"),
    "torch_loaded_before": "torch" in sys.modules,
}))


def test_x():
    pass
"""


def _checkout(root: Path, name: str) -> Path:
    folder = root / name
    (folder / "src").mkdir(parents=True)
    (folder / "test_x.py").write_text(REPORTER)
    (folder / "src" / "side.py").write_text(f"NAME = {name!r}\n")
    return folder


def _launch(root: Path, checkout: Path, *, worker_args: tuple[str, ...] = ()) -> WorkerLaunch:
    return WorkerLaunch(
        cwd=checkout, import_roots=(checkout, checkout / "src"), files=("test_x.py",), device="cpu",
        pin_cpu=None, basetemp=root / f"basetemp-{checkout.name}", log_path=root / "logs" / f"{checkout.name}.log",
        time_only=True, worker_args=worker_args,
    )  # fmt: skip


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    started = Zygote(tmp_path / "logs")
    started.start()
    yield started
    started.close()


@pytest.fixture
def report_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "reports"
    folder.mkdir()
    monkeypatch.setenv("REPORT_DIR", str(folder))
    return folder


def test_both_workers_are_forked_from_one_zygote_each_in_its_own_checkout(
    tmp_path: Path, report_dir: Path, zygote: Zygote
) -> None:
    head, base = _checkout(tmp_path, "headtree"), _checkout(tmp_path, "worktree")
    channels = zygote.fork(_launch(tmp_path, base), _launch(tmp_path, head))
    sides = [RemoteSide(channel, name) for channel, name in zip(channels, ("base", "head"), strict=True)]
    for side in sides:
        side.wait_ready(timeout_s=120)
    seen = {name: json.loads((report_dir / f"{name}.json").read_text()) for name in ("headtree", "worktree")}
    for side in sides:
        side.close()

    assert seen["headtree"]["ppid"] == seen["worktree"]["ppid"] != os.getpid()  # one parent, not the head
    assert seen["headtree"]["pid"] != seen["worktree"]["pid"]
    for name, checkout in (("headtree", head), ("worktree", base)):
        assert seen[name]["cwd"] == str(checkout)
        path = seen[name]["path"]
        assert path.index(str(checkout / "src")) < min(i for i, p in enumerate(path) if "site-packages" in p)
        assert seen[name]["own_module"] == name  # each imports its own checkout's code
        assert seen[name]["time_only"] == "1"
        assert seen[name]["torch_loaded_before"]  # imported once, by the zygote
    assert [channel.process.poll() for channel in channels] == [0, 0]  # QUIT: each ended cleanly


def test_a_killed_zygote_takes_its_workers_with_it(tmp_path: Path, report_dir: Path, zygote: Zygote) -> None:
    head, base = _checkout(tmp_path, "headtree"), _checkout(tmp_path, "worktree")
    channels = zygote.fork(_launch(tmp_path, head), _launch(tmp_path, base))
    for channel, name in zip(channels, ("head", "base"), strict=True):
        RemoteSide(channel, name).wait_ready(timeout_s=120)
    workers = [channel.process for channel in channels]
    assert all(isinstance(w, ForkedWorker) and w.poll() is None for w in workers)
    pids = [json.loads((report_dir / f"{name}.json").read_text())["pid"] for name in ("headtree", "worktree")]
    assert zygote.process is not None
    zygote.process.kill()

    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)
    assert all(w.wait(timeout=10) is not None for w in workers)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"


def test_a_worker_that_ends_early_is_a_worker_error_with_its_exit_code_and_log(tmp_path: Path, zygote: Zygote) -> None:
    head, base = _checkout(tmp_path, "headtree"), _checkout(tmp_path, "worktree")
    bad = ("--no-such-option",)
    channels = zygote.fork(_launch(tmp_path, head, worker_args=bad), _launch(tmp_path, base, worker_args=bad))
    for channel, name in zip(channels, ("head", "base"), strict=True):
        with pytest.raises(WorkerError, match=r"(?s)exited with code 4 .*no-such-option"):
            RemoteSide(channel, name).wait_ready(timeout_s=120)


def test_a_missing_checkout_is_named_before_anything_starts(tmp_path: Path, zygote: Zygote) -> None:
    head = _checkout(tmp_path, "headtree")
    with pytest.raises(WorkerError, match=r"could not start a worker in .*gone"):
        zygote.fork(_launch(tmp_path, head), _launch(tmp_path, tmp_path / "gone"))
    assert zygote.pids == []  # nothing was asked of the zygote


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("", "None"),
        ("import threading; threading.Thread(target=threading.Event().wait, daemon=True).start()", "runs 2 threads"),
    ],
)
def test_a_zygote_forks_only_from_a_single_threaded_process(setup: str, expected: str) -> None:
    code = f"import torch; {setup}\nfrom pytest_gpuperf.workers.twins import unsafe_to_fork; print(unsafe_to_fork())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert expected in out


def test_a_confirmation_pools_pairs_are_all_forked_from_the_sessions_one_zygote(
    tmp_path: Path, report_dir: Path
) -> None:
    head, base = _checkout(tmp_path, "headtree"), _checkout(tmp_path, "worktree")
    zygotes = Zygote(tmp_path / "scratch")
    pool = ConfirmationPool(
        3, lambda j: _launch(tmp_path / f"h{j}", head), lambda j: _launch(tmp_path / f"b{j}", base), "main", zygotes
    )
    parents = []
    try:
        for j in range(3):
            pool._start(j + 1)  # one pair a time: each later pair is asked of the zygote already running
            for side in pool._sides[j]:
                side.wait_ready(timeout_s=120)
            seen = [json.loads((report_dir / f"{name}.json").read_text()) for name in ("headtree", "worktree")]
            assert seen[0]["ppid"] == seen[1]["ppid"] != os.getpid()
            parents.append(seen[0]["ppid"])
        zygote = zygotes.process
        assert zygote is not None
        zygote.kill()  # a zygote that ended is replaced at the next start
        zygote.wait()
        pool._broken.add(2)
        pool._restart_broken()
        pool._start(3)
        for side in pool._sides[2]:
            side.wait_ready(timeout_s=120)
        replaced = json.loads((report_dir / "headtree.json").read_text())["ppid"]
        replacement = zygotes.process
        assert replacement is not None
    finally:
        pool.close()
        zygotes.close()
    assert parents == [parents[0]] * 3
    assert zygote.pid == parents[0] != replaced == replacement.pid
    assert replacement.poll() is not None  # closed with the session


# An installed pytest plugin (a distribution on the path with a ``pytest11`` entry point) that records which
# process imported it, and the worker test that reports what it sees of it.
PLUGIN = """
import os
{setup}
LOADED_IN = os.getpid()
ORIGIN = "installed"
"""
PLUGIN_REPORTER = """
import json, os, sys
from pathlib import Path

import sideplug

Path(os.environ["REPORT_DIR"], Path.cwd().name + ".json").write_text(json.dumps({
    "pid": os.getpid(), "ppid": os.getppid(), "loaded_in": sideplug.LOADED_IN, "origin": sideplug.ORIGIN,
}))


def test_x():
    pass
"""


def _installed_plugin(root: Path, setup: str = "") -> Path:
    site = root / "site"
    info = site / "sideplug-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sideplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nsideplug = sideplug\n")
    (site / "sideplug.py").write_text(PLUGIN.format(setup=setup))
    return site


def _plugin_checkout(root: Path, name: str, *, own_plugin: bool = False) -> Path:
    folder = root / name
    (folder / "src").mkdir(parents=True)
    (folder / "test_x.py").write_text(PLUGIN_REPORTER)
    if own_plugin:  # the repository under test is the plugin's own
        (folder / "sideplug.py").write_text(PLUGIN.format(setup="") + 'ORIGIN = "checkout"\n')
    return folder


def _reports(tmp_path: Path, report_dir: Path, checkouts: list[Path]) -> dict[str, dict]:  # type: ignore[type-arg]
    zygote = Zygote(tmp_path / "logs")
    try:
        channels = zygote.fork(*(_launch(tmp_path, c) for c in checkouts))
        for channel, checkout in zip(channels, checkouts, strict=True):
            side = RemoteSide(channel, checkout.name)
            side.wait_ready(timeout_s=120)
            side.close()
    finally:
        zygote.close()
    return {c.name: json.loads((report_dir / f"{c.name}.json").read_text()) for c in checkouts}


def test_the_zygote_imports_the_installed_plugins_once_and_a_checkout_that_has_one_imports_its_own(
    tmp_path: Path, report_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(_installed_plugin(tmp_path)))
    plain, own = _plugin_checkout(tmp_path, "plain"), _plugin_checkout(tmp_path, "own", own_plugin=True)
    seen = _reports(tmp_path, report_dir, [plain, own])
    assert seen["plain"]["loaded_in"] == seen["plain"]["ppid"] != seen["plain"]["pid"]  # preloaded by the zygote
    assert seen["plain"]["origin"] == "installed"
    assert seen["own"]["origin"] == "checkout" and seen["own"]["loaded_in"] == seen["own"]["pid"]


def test_a_plugin_that_starts_a_thread_is_not_preloaded_and_the_workers_still_fork(
    tmp_path: Path, report_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = "import threading; threading.Thread(target=threading.Event().wait, daemon=True).start()"
    monkeypatch.setenv("PYTHONPATH", str(_installed_plugin(tmp_path, thread)))
    seen = _reports(tmp_path, report_dir, [_plugin_checkout(tmp_path, "plain")])
    assert seen["plain"]["loaded_in"] == seen["plain"]["pid"]  # the worker imported it: the zygote started again


def test_only_the_preloaded_packages_the_path_resolves_elsewhere_are_forgotten(tmp_path: Path) -> None:
    from pytest_gpuperf.workers.twins import forget_shadowed

    installed, checkout, other = tmp_path / "installed", tmp_path / "checkout", tmp_path / "other"
    for folder in (installed, checkout, other):
        folder.mkdir()
    for name in ("_gpuperf_probe_pkg", "_gpuperf_probe_mod"):
        (installed / name).mkdir()
        (installed / name / "__init__.py").write_text("")
    (checkout / "_gpuperf_probe_pkg").mkdir()  # the checkout's own copy of one of them
    (checkout / "_gpuperf_probe_pkg" / "__init__.py").write_text("")
    sys.path.insert(0, str(installed))
    names = frozenset({"_gpuperf_probe_pkg", "_gpuperf_probe_mod"})
    try:
        for name in names:
            __import__(name)
        # the installed copy's folder first (a fresh re-measure puts the session's whole path there): nothing
        assert forget_shadowed([str(other), str(installed), str(checkout)], names) == []
        assert names <= set(sys.modules)
        # the checkout first: its own copy is imported instead of the preloaded one
        assert forget_shadowed([str(checkout), str(installed)], names) == ["_gpuperf_probe_pkg"]
        assert "_gpuperf_probe_pkg" not in sys.modules and "_gpuperf_probe_mod" in sys.modules
    finally:
        sys.path.remove(str(installed))
        for name in [m for m in sys.modules if m.startswith("_gpuperf_probe_")]:
            del sys.modules[name]
