"""Every file pytest-gpuperf writes is written here: whole, atomically, with normal permissions.

A temporary ``.<name>.<16 hex>.tmp`` beside the target is created with mode 0o666
(so the umask applies; ``tempfile.mkstemp`` would make it 0600), fsynced, renamed
over the target and the folder fsynced. Any exception, KeyboardInterrupt included,
removes it; only a killed process can leave one (the baseline store removes those
under its lock; a report has no lock, so nothing can tell a dead writer's from a
live one's). A symbolic link is written through. A device or FIFO is written into,
as a shell redirection would, from content made whole first; a FIFO without a
reader is an error, not a wait. A folder or socket at the path is a WriteError.

The JSON files it reads back (results, baselines) are parsed by :func:`loads_json`: a
number no float holds (NaN, Infinity, ``1e999``, an integer of thousands of digits, which
Python's ``int`` refuses with a bare ValueError past 4,300) becomes a :class:`NotANumber`
that :func:`first_not_a_number` finds with its JSON path, so each reader's error can name it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pytest_gpuperf.errors import WriteError

__all__ = [
    "MAX_JSON_BYTES",
    "Content",
    "NotANumber",
    "export_atomic",
    "first_not_a_number",
    "is_temp_file",
    "loads_json",
    "read_limited",
    "temp_files_of",
    "write_atomic",
    "write_gitignore",
]

Content = str | bytes | Callable[[BinaryIO], object]
"""Text (written as UTF-8), bytes, or a function that writes the content to a binary file."""

_TEMP_NAME = re.compile(r"\.(?P<target>.+)\.[0-9a-f]{16}\.tmp")
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
MAX_INT_DIGITS = 300  # any int of up to 300 digits still converts to a finite float
# The most a results or baseline file may hold: far above any session's or module's (thousands of
# measurements make a few MiB), and a bound on what one read takes, so that /dev/zero or a stray
# dump is refused at once, not read whole and then refused by its schema.
MAX_JSON_BYTES = 64 * 1024 * 1024


def is_temp_file(path: Path) -> bool:
    """Whether ``path`` is a writer's temporary file."""
    return _TEMP_NAME.fullmatch(path.name) is not None


def temp_files_of(path: Path) -> list[Path]:
    """The temporary files of writers of ``path`` that exist now (a killed writer's among them)."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        return [p for p in path.parent.iterdir() if (m := _TEMP_NAME.fullmatch(p.name)) and m["target"] == path.name]
    return []


def write_atomic(path: Path | str, content: Content) -> Path:
    """Replace ``path`` by ``content`` atomically and durably, creating its folder; returns the path.

    WriteError names the file and the reason (a full disk, a file in a folder's way, text UTF-8 cannot encode).
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


def write_gitignore(folder: Path, text: str) -> None:
    """Give ``folder`` a ``.gitignore`` of ``text`` where it has none; an existing one is the user's and stays.

    A nicety, as pytest's cache folder has: a folder that cannot be written is left alone, since the file
    that needs the folder says so itself when it is written.
    """
    path = folder / ".gitignore"
    if path.exists() or path.is_symlink():
        return
    with contextlib.suppress(WriteError):
        write_atomic(path, text)


def export_atomic(path: Path | str, export: Callable[[str], object]) -> Path:
    """``write_atomic`` for a tool that writes a file by name (``torch.profiler``'s trace export).

    ``export`` gets the temporary file's name; whatever it writes there replaces ``path`` whole.
    """

    def fill(fd: int, temp: Path) -> None:
        os.close(fd)
        export(str(temp))
        _fsync(temp, os.O_RDWR)  # fsync needs write access on Windows

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
        if os.name == "posix":  # makes the rename durable; Windows cannot open a folder and needs no such step
            _fsync(target.parent, os.O_RDONLY)
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


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class NotANumber:
    """Stands in for a number no float holds while parsing, so the error can name its JSON path."""

    problem: str  # "NaN is not a JSON number", "number 1e999 is out of range", ...
    integer: bool = False  # an integer too long, rather than NaN, an infinity or an overflowing float


def loads_json(text: str) -> object:
    """``json.loads``, with every number no float holds as a :class:`NotANumber`.

    json.JSONDecodeError and RecursionError (nested too deeply) pass through to the caller.
    """
    return json.loads(text, parse_float=_parse_float, parse_int=_parse_int, parse_constant=_reject_constant)


def first_not_a_number(value: object, where: str = "$") -> tuple[str, NotANumber] | None:
    """The JSON path and placeholder of the first :class:`NotANumber` in a parsed document (None: there is none)."""
    if isinstance(value, NotANumber):
        return where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        inner = (f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if key.isidentifier()
                 else f"{where}[{json.dumps(key)}]")  # fmt: skip
        found = first_not_a_number(item, inner)
        if found:
            return found
    return None


def _reject_constant(name: str) -> NotANumber:
    return NotANumber(f"{name} is not a JSON number")


def _parse_float(text: str) -> float | NotANumber:
    value = float(text)
    if not math.isfinite(value):
        return NotANumber(f"number {text[:40]} is out of range")
    return value


def _parse_int(text: str) -> int | NotANumber:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        return NotANumber(f"an integer of {digits} digits is out of range", integer=True)
    return int(text)


def read_limited(path: Path, limit: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of ``path``, reading no more than ``limit + 1``: a result longer than ``limit`` is too large.

    OSError as ``open`` raises it; the caller names its file and says what too large means for it.
    """
    with path.open("rb") as f:
        return f.read(limit + 1)
