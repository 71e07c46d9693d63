"""Atomic, locked file replacement: readers see the old file or the new one, never a mix.

A writer writes ``.<name>.<16 hex>.tmp`` beside the target, fsyncs it and
renames it over the target (``os.replace`` is atomic on POSIX and Windows),
all under the lock file ``.<name>.lock``. A writer killed mid-way leaves at
most a temporary file, which no reader looks at and the next writer, holding
the lock, deletes. The lock is an OS lock (flock), so a killed holder's lock
dies with it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

from pytest_gpuperf.errors import BaselineError

_TEMP_NAME = re.compile(r"\.(?P<target>.+)\.[0-9a-f]{16}\.tmp")


def lock_path(path: Path) -> Path:
    """The lock file guarding updates of ``path``."""
    return path.with_name(f".{path.name}.lock")


def is_temp_file(path: Path) -> bool:
    """Whether ``path`` is a writer's temporary file."""
    return _TEMP_NAME.fullmatch(path.name) is not None


@contextlib.contextmanager
def locked(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold the lock of ``path``; BaselineError naming the lock file after ``timeout_s``."""
    import filelock

    lock = filelock.FileLock(lock_path(path), timeout=timeout_s)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise BaselineError(
            path,
            f"another session held {lock_path(path).name} for {timeout_s:g}s; if none is running, delete the lock file",
        ) from None
    try:
        yield
    finally:
        lock.release()


def remove_stale_temps(path: Path) -> None:
    """Delete temporary files of ``path`` left by killed writers (call with the lock held)."""
    for candidate in path.parent.iterdir():
        match = _TEMP_NAME.fullmatch(candidate.name)
        if match and match.group("target") == path.name:
            with contextlib.suppress(FileNotFoundError):
                candidate.unlink()


def write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically and durably (call with the lock held)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate in a test id
        raise BaselineError(path, f"cannot encode the file as UTF-8: {exc.reason}") from None
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    # os.open with 0o666 keeps the user's umask (tempfile would make it 0600).
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:  # Ctrl-C (or a SIGTERM handler that raises) too: leave no temporary file
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (POSIX); Windows cannot open a folder and needs no such step."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
