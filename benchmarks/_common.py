"""What the benchmark scripts share: where the repository and the recorded results are, how many baseline
entries a session wrote busy, and the one way a script uses a helper of ``tests/``.

The scripts run as ``python benchmarks/NAME.py`` from the repository root, so Python puts
``benchmarks/`` on ``sys.path`` and they import this module and each other by name; the
project itself is imported as the installed package (``pip install -e .``). Nothing of
``tests/`` is on their path: the three test helpers that benchmarks share (the throwaway
PostgreSQL server, the planted profile regressions, the small GPT whose attention switches) are
loaded by file path through :func:`shared_test_helper`, so each such use is named here and not a
package import.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent  # the repository root
RESULTS = ROOT / "benchmarks" / "results"  # the figures the docs quote, as the scripts wrote them
SHARED_TEST_HELPERS = ("gpt_block", "postgres_server", "profile_plants")  # the only tests/ modules a benchmark uses


def shared_test_helper(name: str) -> ModuleType:
    """``tests/<name>.py``, one of :data:`SHARED_TEST_HELPERS`, loaded by its file path (once)."""
    if name not in SHARED_TEST_HELPERS:
        raise ValueError(f"tests/{name}.py is not a helper the benchmarks share: {SHARED_TEST_HELPERS}")
    module_name = f"_tests_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, ROOT / "tests" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def written_busy(baselines: Path) -> tuple[int, int]:
    """How many baseline entries under ``baselines`` were written while the runner was busy, of how many."""
    entries = [e for path in baselines.rglob("*.json") for e in json.loads(path.read_text())["entries"].values()]
    return sum(1 for e in entries if e.get("written_busy")), len(entries)
