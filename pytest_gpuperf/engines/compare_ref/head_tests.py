"""The head's perf tests placed in a checkout of another revision, to run there on that revision's code.

A pull request usually adds a perf test with the code it changes, and a suite added to an existing
repository is newer than every commit before it: the base has no such test, so compare-ref would have
nothing to compare. As asv runs one benchmark suite against every commit, the head's test files are
copied into the base's worktree (``--gpuperf-base-tests``, ``config.BaseTests``):

- ``auto``: a selected test file the base lacks, or whose base version does not define one of the
  selected tests (found in its syntax tree, ``defined_tests``; a file that does not parse stays the
  base's, which then says why it cannot run), is replaced by the head's; the conftest
  files on its path are copied where the base has none, never over the base's (its own tests beside
  them keep their fixtures). Every other file is the base's own.
- ``head``: every selected test file and every conftest file on their paths is the head's; the engine
  also runs the base with the head's pytest configuration file (``-c``), so markers, ``filterwarnings``
  and ``pythonpath`` are the head's too.
- ``base``: nothing is copied.

Only test and conftest files are copied, and a folder's ``__init__.py`` where the base has no such folder
at all: the base's packages stay the base's. A test file imports the base's code, as it resolves imports
from the checkout (the worker imports the checkout's root and ``src`` first). A copied test that cannot
run there (it imports a name only the head has) says so in its note, with the file's reason
(``HeadTests.note_for``).
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pytest_gpuperf.config import BaseTests

CONFTEST = "conftest.py"
INIT = "__init__.py"


@dataclass(frozen=True)
class PlacedFile:
    """A test file of the head run at the base, and why (``the base has no tests/test_x.py``)."""

    path: str  # relative to the rootdir, as in test ids
    why: str


@dataclass
class HeadTests:
    """What was copied into the checkout: the head's test files by path, and every file written."""

    which: BaseTests = BaseTests.BASE
    files: dict[str, PlacedFile] = field(default_factory=dict)
    copied: list[str] = field(default_factory=list)  # every file written, relative to the target rootdir

    def placed(self, test_id: str) -> PlacedFile | None:
        """The head's file ``test_id`` runs from at the base, or None: the base's own."""
        return self.files.get(test_id.split("::", 1)[0])

    def note_for(self, test_id: str) -> str:
        """``the head's tests/test_x.py at the base: the base's has no test_new`` ('' for the base's own file)."""
        placed = self.placed(test_id)
        return f"the head's {placed.path} at the base: {placed.why}" if placed is not None else ""


def selected_tests(node_ids: Iterable[str]) -> dict[str, set[tuple[str, ...]]]:
    """The selected tests by file: ``tests/t.py::TestA::test_b[1]`` -> ``{"tests/t.py": {("TestA", "test_b")}}``."""
    found: dict[str, set[tuple[str, ...]]] = {}
    for node_id in node_ids:
        path, _, rest = node_id.partition("::")
        names = tuple(part.split("[", 1)[0] for part in rest.split("::") if part)
        found.setdefault(path, set()).add(names)
    return found


def defined_tests(source: str) -> dict[str, set[str] | None] | None:
    """The names a test module defines at its top: each class with its methods (None: it inherits some); None:
    the file does not parse. Assignments and imports count as defined names too."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    names: dict[str, set[str] | None] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            methods = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            names[node.name] = None if node.bases else methods  # a base class may hold tests: any method counts
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = set()
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update({t.id: set() for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
    return names


def missing_tests(base_file: Path, wanted: set[tuple[str, ...]]) -> list[str] | None:
    """The ``wanted`` tests the base's file does not define, as ``Class::name``; None: the file does not parse."""
    defined = defined_tests(base_file.read_text(encoding="utf-8", errors="replace"))
    if defined is None:
        return None
    missing = []
    for names in sorted(wanted):
        if not names:
            continue
        if names[0] not in defined:
            missing.append("::".join(names))
            continue
        methods = defined[names[0]]
        if len(names) > 1 and methods is not None and names[1] not in methods:
            missing.append("::".join(names))
    return missing


def place_head_tests(source: Path, target: Path, node_ids: Sequence[str], which: BaseTests) -> HeadTests:
    """Copy the head's test files under rootdir ``source`` into the base's rootdir ``target`` as ``which`` asks.

    OSError if a file cannot be copied; a path outside either rootdir is never copied.
    """
    placed = HeadTests(which)
    if which is BaseTests.BASE:
        return placed
    for path, wanted in sorted(selected_tests(node_ids).items()):
        why = _why_head(source, target, path, wanted, which)
        if why is None or not _inside(source, source / path) or not _inside(target, target / path):
            continue
        placed.files[path] = PlacedFile(path, why)
        _copy_with_folders(source, target, PurePosixPath(path), placed, which)
    return placed


def _why_head(source: Path, target: Path, path: str, wanted: set[tuple[str, ...]], which: BaseTests) -> str | None:
    """Why the base runs the head's ``path`` (None: it runs its own)."""
    if not (source / path).is_file():
        return None  # not a file of the head (a test collected from elsewhere): nothing to copy
    if which is BaseTests.HEAD:
        return "--gpuperf-base-tests=head"
    base_file = target / path
    if not base_file.is_file():
        return f"the base has no {path}"
    missing = missing_tests(base_file, wanted)
    if missing is None:
        return None  # the base's own file, broken: its failure to collect is the base's to say
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        return f"the base's {path} has no {missing[0]}{more}"
    return None


def _copy_with_folders(source: Path, target: Path, path: PurePosixPath, placed: HeadTests, which: BaseTests) -> None:
    """The test file, the conftest files on its path (over the base's under ``head`` only) and new folders' inits."""
    folders = [PurePosixPath(*path.parts[:n]) for n in range(len(path.parts))]  # "", "tests", "tests/perf"
    new_folders = {folder for folder in folders if not (target / folder).is_dir()}
    for folder in folders:
        _copy(source / folder / CONFTEST, target / folder / CONFTEST, placed, target, replace=which is BaseTests.HEAD)
        if folder in new_folders:
            _copy(source / folder / INIT, target / folder / INIT, placed, target, replace=False)
    _copy(source / path, target / path, placed, target, replace=True)


def _copy(source_file: Path, target_file: Path, placed: HeadTests, target: Path, *, replace: bool) -> None:
    name = target_file.relative_to(target).as_posix()
    if not source_file.is_file() or name in placed.copied or (target_file.exists() and not replace):
        return  # not the head's, copied already for another test file, or the base's to keep
    target_file.parent.mkdir(parents=True, exist_ok=True)
    target_file.unlink(missing_ok=True)  # a link at the base is replaced, never written through
    shutil.copy2(source_file, target_file)
    placed.copied.append(name)


def _inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def head_configuration(
    inifile: Path, repo_root: Path, checkout: Path, rootdir: Path, placed: HeadTests
) -> tuple[str, ...]:
    """The base worker's options that make the head's pytest configuration its own: ``-c FILE --rootdir=DIR``.

    The file is copied to its place in ``checkout`` (relative paths in it, ``pythonpath`` and ``testpaths``,
    resolve there, in the base's code); one outside the repository is read where it is. ``rootdir``: the
    checkout's folder that is the head's rootdir, so that test ids are the head's.
    """
    try:
        inside = checkout / inifile.resolve().relative_to(repo_root.resolve())
    except ValueError:
        return ("-c", str(inifile), f"--rootdir={rootdir}")
    inside.parent.mkdir(parents=True, exist_ok=True)
    inside.unlink(missing_ok=True)
    shutil.copy2(inifile, inside)
    placed.copied.append(inside.relative_to(checkout).as_posix())
    return ("-c", str(inside), f"--rootdir={rootdir}")
