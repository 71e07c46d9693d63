"""The git-tracked baseline store: ``<root>/<device class>/<safe module name>.json``.

Reads validate every file (schema, plausibility, location). Updates lock the file, re-read, merge and
replace it atomically, so concurrent sessions and xdist workers lose nothing; a corrupt file is never
overwritten. Files are updated one by one: an update of two modules can fail after writing the first.

Baseline files and their device-class folders are regular files and folders: a symbolic link (a
dangling one would make an update write wherever it points, one to ``/dev/zero`` would read as no
baseline) or a device or FIFO where a file belongs is refused by name (``_regular_file``), and a
file is read no further than ``files.MAX_JSON_BYTES``, as a results file is.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_gpuperf.baseline import atomic, codec, migrate, schema
from pytest_gpuperf.baseline.naming import device_class_dir, module_file_name, module_of
from pytest_gpuperf.baseline.record import entry_from_measurement
from pytest_gpuperf.errors import BaselineError, NonFiniteNumberError
from pytest_gpuperf.files import MAX_JSON_BYTES, read_limited
from pytest_gpuperf.model import BaselineEntry, measurement_key
from pytest_gpuperf.model import device_class as classes

__all__ = ["BaselineStore", "EntryChange", "entry_from_measurement"]

ChangeKind = Literal["added", "changed", "unchanged"]

DEFAULT_LOCK_TIMEOUT_S = 120.0
GITIGNORE = "# pytest-gpuperf: lock and temporary files of the baseline store\n.*.lock\n.*.tmp\n"


@dataclass(frozen=True)
class EntryChange:
    """What an update did to one entry."""

    key: str
    path: Path
    kind: ChangeKind


@dataclass(frozen=True)
class _ParsedFile:
    text: str
    document: migrate.Document
    entries: dict[str, BaselineEntry]


class BaselineStore:
    """Baselines under ``root``, one JSON file per device class and test module."""

    def __init__(self, root: Path, *, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> None:
        self.root = Path(root)
        self.lock_timeout_s = lock_timeout_s
        self._cache: dict[Path, _ParsedFile] = {}

    def file_for(self, device_class: str, test_id: str) -> Path:
        """The file holding the baselines of ``test_id``'s module on ``device_class``."""
        return self.root / device_class_dir(device_class) / module_file_name(module_of(test_id))

    def _device_dirs(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    @staticmethod
    def _baseline_files(folder: Path) -> list[Path]:
        """Every ``*.json`` of ``folder`` but hidden ones: links and other non-files too, to be refused by name."""
        return sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".")
                      and (p.is_symlink() or not p.is_dir()))  # fmt: skip

    def _parse_file(self, path: Path, raw: bytes | None = None, *, earlier: _ParsedFile | None = None) -> _ParsedFile:
        if raw is None:
            raw = _read(path)
            if raw is None:
                raise BaselineError(path, "cannot read it: there is no such file")
        document = codec.parse_document(raw, path, validated=earlier.document["entries"] if earlier else None)
        self._check_location(path, document)
        return _ParsedFile(raw.decode("utf-8"), document, codec.decode_entries(document))

    @staticmethod
    def _check_location(path: Path, document: migrate.Document) -> None:
        """A file must sit where its device class and module say (catches hand-moved files)."""
        expected_dir = device_class_dir(document["device_class"])
        if path.parent.name != expected_dir:
            raise BaselineError(
                path,
                f"the file is for device class {document['device_class']!r}, whose folder is"
                f" {expected_dir!r}, but it is in {path.parent.name!r}",
                json_path="$.device_class",
            )
        expected_name = module_file_name(document["module"])
        if path.name != expected_name:
            raise BaselineError(
                path,
                f"the file is for module {document['module']!r}, whose file name is {expected_name!r}",
                json_path="$.module",
            )

    def _cached(self, path: Path) -> _ParsedFile:
        if path not in self._cache:
            self._cache[path] = self._parse_file(path)
        return self._cache[path]

    def load(self, device_class: str, test_id: str, name: str) -> BaselineEntry | None:
        """The baseline of measurement ``name`` of ``test_id`` on ``device_class``, or None; for a CPU class
        with kernels also an entry of its model's older class that recorded them (migrate.current_class)."""
        key = measurement_key(test_id, name)
        path = self.file_for(device_class, test_id)
        if _regular_file(path) and key in self._cached(path).entries:
            return self._cached(path).entries[key]
        legacy, kernels = classes.split(device_class)
        legacy_path = self.file_for(legacy, test_id)
        if kernels is None or not _regular_file(legacy_path):
            return None
        entry = self._cached(legacy_path).entries.get(key)
        if entry is None or migrate.current_class(entry, legacy) != device_class:
            return None
        return migrate.in_current_class(entry, legacy)

    def load_other_classes(self, test_id: str, name: str, *, exclude: str | None = None) -> list[BaselineEntry]:
        """The same measurement's baselines on every device class but ``exclude``, each in the class
        it belongs to today (migrate.current_class), so a CPU entry says which kernels ran."""
        key = measurement_key(test_id, name)
        file_name = module_file_name(module_of(test_id))
        skip = device_class_dir(exclude) if exclude else None
        found = []
        for folder in self._device_dirs():
            path = folder / file_name
            if folder.name == skip or not _regular_file(path):
                continue
            entry = self._cached(path).entries.get(key)
            if entry is None:
                continue
            document_class = self._cached(path).document["device_class"]
            entry = migrate.in_current_class(entry, document_class)
            if exclude is None or migrate.current_class(entry, document_class) != exclude:
                found.append(entry)
        return found

    def holds_files(self) -> bool:
        """Whether any baseline file is under the root (the lock files sessions leave are none)."""
        return any(self._baseline_files(folder) for folder in self._device_dirs())

    def iter_entries(self) -> Iterator[tuple[str, Path, BaselineEntry]]:
        """(device class, file, entry) for every entry under the root, in a stable order.
        Raises BaselineError at the first invalid file; validate_tree lists them all."""
        for folder in self._device_dirs():
            for path in self._baseline_files(folder):
                parsed = self._cached(path)
                for key in sorted(parsed.entries):
                    yield parsed.document["device_class"], path, parsed.entries[key]

    def validate_tree(self) -> list[BaselineError]:
        """Every problem in the tree, one error per bad file (reads from disk, not the cache)."""
        if not self.root.is_dir():
            return []
        errors = [
            BaselineError(stray, "a baseline file belongs in a device-class folder: <root>/<class>/<module>.json")
            for stray in self._baseline_files(self.root)
        ]
        for folder in self._device_dirs():
            for path in self._baseline_files(folder):
                try:
                    self._parse_file(path)
                except BaselineError as exc:
                    errors.append(exc)
        return errors

    def update(self, device_class: str, entries: Sequence[BaselineEntry]) -> list[EntryChange]:
        """Add or replace ``entries`` of ``device_class``, leaving every other entry as it is."""
        groups: dict[str, list[BaselineEntry]] = {}
        seen: set[str] = set()
        for entry in entries:
            if entry.key in seen:
                raise ValueError(f"{entry.key}: the same measurement is twice in one update")
            seen.add(entry.key)
            env_class = entry.environment.device_class if entry.environment else device_class
            if env_class != device_class:
                raise ValueError(
                    f"{entry.key}: measured on device class {env_class!r}, cannot be stored under {device_class!r}"
                )
            groups.setdefault(module_of(entry.key), []).append(entry)
        legacy, kernels = classes.split(device_class)
        changes = self.migrate_legacy_class(legacy) if kernels is not None else []
        for module in sorted(groups):
            changes += self._update_file(device_class, module, groups[module])
        return changes

    def migrate_legacy_class(self, legacy: str) -> list[EntryChange]:
        """Move the entries of a CPU class without kernels that recorded theirs into their class's folder
        (written there before they leave, so an interrupted move leaves a copy); returns the added ones."""
        folder = self.root / device_class_dir(legacy)
        if not folder.is_dir() or classes.split(legacy)[1] is not None or not classes.is_cpu(legacy):
            return []
        changes: list[EntryChange] = []
        for path in self._baseline_files(folder):
            parsed = self._cached(path)
            moving: dict[str, list[BaselineEntry]] = {}
            for entry in parsed.entries.values():
                target = migrate.current_class(entry, legacy)
                if target != legacy:
                    moving.setdefault(target, []).append(migrate.in_current_class(entry, legacy))
            for target in sorted(moving):
                changes += self._update_file(target, parsed.document["module"], moving[target])
            if moving:
                self._remove_entries(path, {e.key for group in moving.values() for e in group})
        return [c for c in changes if c.kind == "added"]

    def _remove_entries(self, path: Path, keys: set[str]) -> None:
        """Drop ``keys`` from the file (under its lock); an emptied file is deleted."""
        with atomic.locked(path, self.lock_timeout_s):
            existing = self._reread(path)
            if existing is None:
                return
            kept = {k: v for k, v in existing.document["entries"].items() if k not in keys}
            self._cache.pop(path, None)
            if not kept:
                path.unlink()
                return
            document = {**existing.document, "schema_version": migrate.CURRENT_VERSION, "entries": kept}
            atomic.write(path, codec.dump_document(document))

    def _update_file(self, device_class: str, module: str, entries: list[BaselineEntry]) -> list[EntryChange]:
        path = self.file_for(device_class, module)
        _regular_file(path)  # a link is refused before anything is written, or its folder made
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._write_gitignore()
            with atomic.locked(path, self.lock_timeout_s):
                atomic.remove_stale_temps(path)
                return self._merge_and_write(path, device_class, module, entries)
        except OSError as exc:  # a read-only checkout, a full disk: name the file, no traceback
            raise BaselineError(path, f"cannot update it: {exc.strerror or exc}") from None

    def _reread(self, path: Path) -> _ParsedFile | None:
        """The file as it is now (call under its lock); the cached parse if the bytes are the same."""
        raw = _read(path)
        if raw is None:
            return None
        cached = self._cache.get(path)
        if cached is not None and cached.text.encode("utf-8") == raw:
            return cached  # no other process wrote it since: no need to validate again
        return self._parse_file(path, raw, earlier=cached)

    def _merge_and_write(
        self, path: Path, device_class: str, module: str, entries: list[BaselineEntry]
    ) -> list[EntryChange]:
        """Merge ``entries`` into the file (call under its lock). Merging raw JSON, not decoded entries,
        keeps untouched entries byte-identical."""
        existing = self._reread(path)
        merged = dict(existing.document["entries"]) if existing else {}
        decoded = dict(existing.entries) if existing else {}
        changes = []
        for entry in entries:
            codec.check_key(entry.key, module, path)
            try:
                new = codec.entry_to_json(entry)
            except NonFiniteNumberError as exc:
                raise BaselineError(
                    path, f"{entry.key}: {exc}", json_path=schema.json_path(("entries", entry.key, *exc.parts))
                ) from None
            # Only new entries need checking: the others passed the checks when the file was read.
            codec.check_entry(new, path, entry.key, writing=True)
            old = merged.get(entry.key)
            kind: ChangeKind = "added" if old is None else "unchanged" if codec.same_json(old, new) else "changed"
            merged[entry.key] = new
            decoded[entry.key] = codec.decode_entry(new, entry.key)
            changes.append(EntryChange(entry.key, path, kind))
        if existing is not None and all(change.kind == "unchanged" for change in changes):
            return changes  # nothing to write: the file keeps its bytes, whatever version and layout it was written in
        document = {
            "schema_version": migrate.CURRENT_VERSION,
            "device_class": device_class,
            "module": module,
            "entries": merged,
        }
        schema.validate({**document, "entries": {}}, migrate.CURRENT_VERSION, path)
        text = codec.dump_document(document)
        if existing is None or existing.text != text:
            atomic.write(path, text)
        self._cache[path] = _ParsedFile(text, document, decoded)
        return changes

    def _write_gitignore(self) -> None:
        """Keep lock and temporary files out of git: add the patterns a .gitignore here lacks, atomically.

        A file left empty or cut short (a full disk, an older writer) is completed at the next update; the
        user's own lines are kept. An unwritable folder leaves it as it is: the entries matter, this does not.
        """
        path = self.root / ".gitignore"
        if path.is_symlink():  # the user's; never written through
            return
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        except (OSError, UnicodeDecodeError):
            return
        have = set(text.splitlines())
        comment, *patterns = GITIGNORE.splitlines()
        missing = [line for line in patterns if line not in have]
        if not missing:
            return
        added = ([] if comment in have else [comment]) + missing
        kept = text if not text or text.endswith("\n") else text + "\n"
        with contextlib.suppress(OSError, BaselineError), atomic.locked(path, self.lock_timeout_s):
            atomic.write(path, kept + "".join(f"{line}\n" for line in added))


def _regular_file(path: Path) -> bool:
    """Whether a baseline file is at ``path`` (False: nothing is); BaselineError for a link or anything else there.

    Its device-class folder must not be a link either. Read through a link, a baseline could come
    from anywhere (``/dev/zero`` reads as no baseline at all); written through a dangling one, an
    update would create a file outside the repository.
    """
    for candidate in (path.parent, path):
        if candidate.is_symlink():
            raise BaselineError(candidate, f"is a symbolic link (to {os.readlink(candidate)!r}): baseline files and "
                                "their folders must be the files themselves; replace the link with what it points to, "
                                "or remove it")  # fmt: skip
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):  # nothing there (a file where a folder belongs: said on update)
        return False
    except OSError as exc:
        raise BaselineError(path, f"cannot read it: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "a device or FIFO" if not stat.S_ISSOCK(mode) else "a socket"
        raise BaselineError(path, f"is {what}, not a baseline file; remove it")
    return True


def _read(path: Path) -> bytes | None:
    """The bytes of the baseline file at ``path`` (None: there is none), read no further than MAX_JSON_BYTES."""
    if not _regular_file(path):
        return None
    try:
        raw = read_limited(path, MAX_JSON_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise BaselineError(path, f"cannot read it: {exc.strerror or exc}") from None
    if len(raw) > MAX_JSON_BYTES:
        raise BaselineError(path, f"cannot be read: larger than {MAX_JSON_BYTES // 2**20} MiB, the most a baseline "
                            "file may hold")  # fmt: skip
    return raw
