"""The one atomic writer (pytest_gpuperf/files.py) and every report written through it."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
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


def test_a_symlinked_report_is_written_through_the_link(tmp_path: Path) -> None:
    real = tmp_path / "store" / "report.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(real)
    assert write_atomic(link, "new") == link
    assert link.is_symlink() and real.read_text() == "new"
    dangling = tmp_path / "later.json"
    dangling.symlink_to(tmp_path / "store" / "later.json")
    write_atomic(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "store" / "later.json").read_text() == "made"
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "store") == []


def _device(tmp_path: Path, name: str, minor: int) -> Path:
    path = tmp_path / name
    try:  # a copy of /dev/null (1, 3) or /dev/full (1, 7): the real ones are not the tests' to risk
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except (PermissionError, AttributeError, OSError):
        pytest.skip("creating a device node needs root on a filesystem that allows devices")
    return path


def test_a_device_is_written_into_never_replaced(tmp_path: Path) -> None:
    null = _device(tmp_path, "null", 3)
    assert write_atomic(null, "results") == null
    export_atomic(null, lambda name: Path(name).write_text("trace"))
    assert stat.S_ISCHR(null.stat().st_mode)
    full = _device(tmp_path, "full", 7)
    with pytest.raises(WriteError, match=r"full.*No space left on device"):
        write_atomic(full, "results")
    assert stat.S_ISCHR(full.stat().st_mode)
    assert leftovers(tmp_path) == []


def test_a_fifo_gets_the_content_and_one_without_reader_is_an_error(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(WriteError, match="no process reads this FIFO"):
        write_atomic(fifo, "lost?")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    deadline = time.monotonic() + 10
    while True:  # the reader opens the FIFO in its own time
        try:
            write_atomic(fifo, "x" * 200_000)
            break
        except WriteError:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    reader.join(10)
    assert got == [b"x" * 200_000] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_folder_or_socket_at_the_path_is_refused_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "out.json"
    folder.mkdir()
    with pytest.raises(WriteError, match=r"out.json.*it is a folder; give the path of a file"):
        write_atomic(folder, "x")
    sock_path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(WriteError, match="is a socket"):
            write_atomic(sock_path, "x")
        assert stat.S_ISSOCK(sock_path.stat().st_mode)
