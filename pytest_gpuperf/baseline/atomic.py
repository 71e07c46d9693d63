"""Locked, atomic replacement of baseline files: readers see the old file or the new one, never a mix.

The write (``files.write_atomic``) happens under the lock file ``.<name>.lock``, as the store reads, merges
and writes a file as one step. The lock is an OS lock (flock), so it dies with a killed holder.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from pytest_gpuperf.errors import BaselineError, WriteError
from pytest_gpuperf.files import is_temp_file, temp_files_of, write_atomic

__all__ = ["is_temp_file", "lock_path", "locked", "remove_stale_temps", "write"]


def lock_path(path: Path) -> Path:
    """The lock file guarding updates of ``path``."""
    return path.with_name(f".{path.name}.lock")


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
    for candidate in temp_files_of(path):
        with contextlib.suppress(FileNotFoundError):
            candidate.unlink()


def write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically and durably (call with the lock held)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate in a test id
        raise BaselineError(path, f"cannot encode the file as UTF-8: {exc.reason}") from None
    try:
        write_atomic(path, data)
    except WriteError as exc:
        raise BaselineError(path, f"cannot update it: {exc.reason}") from None
