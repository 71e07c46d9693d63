"""Every file pytest-gpuperf writes is written here: whole, atomically, with normal permissions.

The writer creates ``.<name>.<16 hex>.tmp`` beside the target with mode 0o666, so
the user's umask applies as for any file they create (``tempfile.mkstemp`` would
make it 0600), fills it, fsyncs it, renames it over the target (``os.replace`` is
atomic on POSIX and Windows) and fsyncs the folder so that the rename is durable.
Readers see the old file or the new one, never a part. Any exception on the way,
KeyboardInterrupt included, removes the temporary file; only a process killed
outright (SIGKILL, power loss) can leave one behind. The baseline store, which
holds a lock per file (``baseline/atomic.py``), removes those of its files under
that lock; a report has no lock, since nothing reads and merges it, so nothing can
tell a dead writer's temporary file from a live one's there.

A non-regular file is never replaced. A symbolic link is written through: the
file it points to is replaced as above and the link stays. A device or a FIFO
(``--gpuperf-json=/dev/null``, ``/dev/stdout``, a named pipe) is written into,
as a shell redirection would: the content is first made whole in a private
temporary folder, then copied in; a FIFO that no process reads is an error, not
a wait. A folder or a socket at the path is a WriteError naming it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from pytest_gpuperf.errors import WriteError

__all__ = ["Content", "export_atomic", "is_temp_file", "temp_files_of", "write_atomic"]

Content = str | bytes | Callable[[BinaryIO], object]
"""Text (written as UTF-8), bytes, or a function that writes the content to a binary file."""

_TEMP_NAME = re.compile(r"\.(?P<target>.+)\.[0-9a-f]{16}\.tmp")
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def is_temp_file(path: Path) -> bool:
    """Whether ``path`` is a writer's temporary file."""
    return _TEMP_NAME.fullmatch(path.name) is not None


def temp_files_of(path: Path) -> list[Path]:
    """The temporary files of writers of ``path`` that exist now (a killed writer's among them)."""
    found = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for candidate in path.parent.iterdir():
            match = _TEMP_NAME.fullmatch(candidate.name)
            if match and match.group("target") == path.name:
                found.append(candidate)
    return found


def write_atomic(path: Path | str, content: Content) -> Path:
    """Replace ``path`` by ``content`` atomically and durably; creates its folder; returns the path.

    WriteError names the file and the reason (a full disk, a file where a folder
    should be, text that UTF-8 cannot encode).
    """
    target = Path(path)
    if isinstance(content, str):
        try:
            content = content.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate, from a file name that is not UTF-8
            raise WriteError(target, f"cannot encode the file as UTF-8: {exc.reason}") from None

    def fill(fd: int, temp: Path) -> None:
        with os.fdopen(fd, "wb") as f:
            if isinstance(content, bytes):
                f.write(content)
            else:
                content(f)
            f.flush()
            os.fsync(f.fileno())

    return _replace(target, fill)


def export_atomic(path: Path | str, export: Callable[[str], object]) -> Path:
    """``write_atomic`` for a tool that writes a file by name (``torch.profiler``'s trace export).

    ``export`` gets the temporary file's name; whatever it writes there replaces ``path`` whole.
    """

    def fill(fd: int, temp: Path) -> None:
        os.close(fd)
        export(str(temp))
        fd = os.open(temp, os.O_RDWR)  # fsync needs write access on Windows
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    return _replace(Path(path), fill)


def _replace(path: Path, fill: Callable[[int, Path], None]) -> Path:
    target = Path(os.path.realpath(path)) if path.is_symlink() else path  # through a link, not over it
    try:
        mode = target.stat().st_mode
    except OSError:
        mode = None  # nothing there yet (or unreadable: the write below says why)
    if mode is not None and not stat.S_ISREG(mode):
        _write_into(path, target, mode, fill)
        return path
    temp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # "File exists" alone would not say which: a file is in the folder's way
        raise WriteError(target, f"cannot create the folder {target.parent}: {exc.strerror or exc}") from None
    try:
        try:
            # inside the try: an interrupt right after the file exists still removes it
            fill(os.open(temp, _CREATE, 0o666), temp)
            os.replace(temp, target)
        except BaseException:  # Ctrl-C (or a SIGTERM handler that raises) too: leave no temporary file
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        _fsync_dir(target.parent)
    except OSError as exc:
        raise WriteError(path, exc.strerror or str(exc)) from None
    return path


def _write_into(path: Path, target: Path, mode: int, fill: Callable[[int, Path], None]) -> None:
    """Write into the device or FIFO at ``target``, whole; a folder or socket there is a WriteError."""
    if not (stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode)):
        what = "a folder" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        where = "it" if target == path else f"{target}, where it links,"
        raise WriteError(path, f"{where} is {what}; give the path of a file")
    try:
        with tempfile.TemporaryDirectory(prefix="gpuperf-") as folder:
            temp = Path(folder) / target.name
            fill(os.open(temp, _CREATE, 0o666), temp)
            # O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of waiting for one forever
            fd = os.open(target, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0))
            if hasattr(os, "set_blocking"):
                os.set_blocking(fd, True)
            with open(temp, "rb") as src, os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst)
    except OSError as exc:
        reason = "no process reads this FIFO" if exc.errno == errno.ENXIO else exc.strerror or str(exc)
        raise WriteError(path, reason) from None


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (POSIX); Windows cannot open a folder and needs no such step."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
