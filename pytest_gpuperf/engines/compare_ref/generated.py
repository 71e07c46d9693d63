"""The head's generated files, carried into a checkout of another revision so that it imports as the head does.

A build or an install writes files into a package that git ignores: setuptools-scm's
``src/pkg/_version.py``, a version module of hatch-vcs or versioneer, a generated config. A checkout of
the base (worktree.py), or of the head for confirmation pairs (headtree.py), lacks them, and a package
that imports one fails at import: the worker cannot start. So the git-ignored files inside the head's
importable packages (the folders with an ``__init__.py`` in the folders a worker imports from first,
``IMPORT_ROOTS``) are copied into the checkout. Only small source and data files: bytecode caches are
the interpreter's, and a compiled extension is code, which would make the base measure the head's code.
A file the checkout has (tracked at that revision) is never replaced.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

# The folders of a checkout that a worker imports from first (remote.WorkerLaunch.import_roots): its root and
# a src layout's ``src``.
IMPORT_ROOTS = (".", "src")
MAX_CARRIED_BYTES = 256 * 1024  # a generated version or config module is a few hundred bytes
# compiled code and the interpreter's caches: never the head's in another revision's checkout
NOT_CARRIED_SUFFIXES = frozenset({".pyc", ".pyo", ".so", ".pyd", ".dylib", ".dll", ".o", ".a"})


def package_dirs(root: Path) -> list[str]:
    """The regular packages (folders with an ``__init__.py``) directly in ``root``'s import roots, relative to it."""
    found = []
    for import_root in IMPORT_ROOTS:
        folder = root / import_root
        if folder.is_dir():
            found += [
                PurePosixPath(import_root, p.name).as_posix()
                for p in sorted(folder.iterdir())
                if (p / "__init__.py").is_file() and not p.name.startswith(".")
            ]
    return found


def generated_files(repo_root: Path) -> list[str]:
    """The git-ignored files in the head's importable packages worth carrying (module doc), relative to the root."""
    import git

    packages = package_dirs(repo_root)
    if not packages:
        return []
    with git.Repo(repo_root) as repo:
        listed = repo.git.ls_files("--others", "--ignored", "--exclude-standard", "-z", "--", *packages)
    return [name for name in sorted(set(listed.split("\0")) - {""}) if _worth_carrying(repo_root, name)]


def _worth_carrying(repo_root: Path, name: str) -> bool:
    path = PurePosixPath(name)
    if "__pycache__" in path.parts or path.suffix in NOT_CARRIED_SUFFIXES:
        return False
    source = repo_root / name
    return source.is_file() and not source.is_symlink() and source.stat().st_size <= MAX_CARRIED_BYTES


def carry_generated(repo_root: Path, checkout: Path) -> list[str]:
    """Copy the head's generated files (``generated_files``) into ``checkout`` where it has none; those copied."""
    carried = []
    for name in generated_files(repo_root):
        target = checkout / name
        if target.exists() or target.is_symlink() or not target.parent.is_dir():
            continue  # tracked at that revision, or a package the revision does not have
        shutil.copy2(repo_root / name, target)
        carried.append(name)
    return carried
