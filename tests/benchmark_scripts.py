"""Loading a script of ``benchmarks/`` as a module, for the tests of its arithmetic and output.

The one place the tests reach into ``benchmarks/``: a script is loaded by its file path, with
``benchmarks/`` on ``sys.path`` as when it runs as ``python benchmarks/NAME.py`` (its siblings
and ``_common`` import by name); nothing of ``benchmarks/`` is imported as a package.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@contextlib.contextmanager
def benchmark_script(name: str) -> Iterator[ModuleType]:
    """``benchmarks/<name>.py`` imported under ``name`` for the block, then forgotten (and its siblings with it)."""
    path, modules = list(sys.path), set(sys.modules)
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path[:] = path
        for loaded in set(sys.modules) - modules:  # the script's siblings, so that no other test sees them
            file = getattr(sys.modules[loaded], "__file__", None)
            if file is not None and Path(file).parent == BENCHMARKS:
                del sys.modules[loaded]
