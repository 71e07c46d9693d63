"""The one atomic writer (pytest_gpuperf/files.py) and every report written through it."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest
from test_report_helpers import make_session

from pytest_gpuperf.errors import WriteError
from pytest_gpuperf.files import export_atomic, is_temp_file, write_atomic
from pytest_gpuperf.report import write_reports


@pytest.fixture
def umask_022() -> Iterator[int]:
    previous = os.umask(0o022)
    try:
        yield 0o022
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if is_temp_file(p)]


def test_text_bytes_and_stream_writers_replace_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.txt"
    write_atomic(target, "first é\n")
    assert target.read_bytes() == "first é\n".encode()
    write_atomic(target, b"\x00second")
    assert target.read_bytes() == b"\x00second"
    write_atomic(target, lambda f: f.write(b"third"))
    assert target.read_bytes() == b"third"
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_get_the_permissions_of_the_users_umask(tmp_path: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        written = write_atomic(tmp_path / "f.txt", "x")
        exported = export_atomic(tmp_path / "trace.json", lambda name: Path(name).write_text("{}"))
    finally:
        os.umask(previous)
    assert mode(written) == 0o666 & ~umask
    assert mode(exported) == 0o666 & ~umask


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_every_report_file_gets_normal_permissions(tmp_path: Path, umask_022: int) -> None:
    reports = write_reports(
        make_session(),
        {
            "json": tmp_path / "results.json",
            "markdown": tmp_path / "comment.md",
            "benchmark-json": tmp_path / "bench.json",
            "html": tmp_path / "report.html",
        },
    )
    assert reports.failed == []
    assert {p.name: oct(mode(p)) for p in reports.written} == {
        name: oct(0o644) for name in ("results.json", "comment.md", "bench.json", "report.html")
    }


class Interrupting:
    """Content whose writing is cut by Ctrl-C half-way, as a real interrupt would."""

    def __call__(self, f: BinaryIO) -> None:
        f.write(b"half of the new content")
        raise KeyboardInterrupt


def test_ctrl_c_while_writing_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, Interrupting())
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_ctrl_c_in_a_tool_that_writes_by_name_leaves_no_temp(tmp_path: Path) -> None:
    def export(name: str) -> None:
        Path(name).write_text("partial trace")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_atomic(tmp_path / "trace.json", export)
    assert list(tmp_path.iterdir()) == []


CTRL_C = """
import os, signal, sys, time
from pytest_gpuperf.files import write_atomic

def content(f):
    f.write(b"half of it")
    f.flush()
    os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C in the terminal sends
    time.sleep(30)  # the interrupt arrives here

try:
    write_atomic(sys.argv[1], content)
except KeyboardInterrupt:
    sys.exit(42)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="POSIX signals")
def test_a_real_sigint_mid_write_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out" / "report.html"
    target.parent.mkdir()
    target.write_text("old")
    script = tmp_path / "ctrl_c.py"
    script.write_text(CTRL_C)
    done = subprocess.run([sys.executable, str(script), str(target)], timeout=60, check=False)
    assert done.returncode == 42
    assert target.read_text() == "old"
    assert list(target.parent.iterdir()) == [target]


def test_a_failed_write_names_the_target_not_the_temp(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(WriteError) as info:
        write_atomic(blocker / "results.json", "x")
    assert info.value.path == blocker / "results.json"
    assert str(blocker / "results.json") in str(info.value)
    assert ".tmp" not in str(info.value)
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(WriteError, match="a-folder"):
        write_atomic(folder, "x")
    assert leftovers(tmp_path) == []


def test_text_that_utf8_cannot_encode_is_a_write_error(tmp_path: Path) -> None:
    with pytest.raises(WriteError, match="UTF-8"):
        write_atomic(tmp_path / "x.md", "test_\udcff")
    assert list(tmp_path.iterdir()) == []
