"""The package's layering, checked by import-linter's contracts in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def test_no_lower_layer_imports_an_upper_one_and_the_gpu_path_skips_the_cpu_guard() -> None:
    pytest.importorskip("importlinter")
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def contracts() -> list[dict]:  # type: ignore[type-arg]
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found: list[dict] = data["tool"]["importlinter"]["contracts"]  # type: ignore[type-arg]
    return found


def named_in_contracts() -> set[str]:
    import re

    names: set[str] = set()
    for contract in contracts():
        for key in ("layers", "modules", "containers"):
            for entry in contract.get(key, ()):
                names |= set(re.split(r"\s*[|:]\s*", entry.strip()))
    return names


def test_every_module_of_the_package_sits_in_a_layer_or_an_independence_contract() -> None:
    import pkgutil

    import pytest_gpuperf

    modules = {f"pytest_gpuperf.{m.name}" for m in pkgutil.iter_modules(pytest_gpuperf.__path__)}
    missing = sorted(m for m in modules if not any(m == n or m.startswith(f"{n}.") for n in named_in_contracts()))
    assert not missing, f"not in any import-linter contract of pyproject.toml: {missing}"


def test_the_cpu_guard_contract_checks_indirect_imports() -> None:
    (guard,) = [c for c in contracts() if c.get("forbidden_modules") == ["pytest_gpuperf.host.cpu"]]
    assert not guard.get("allow_indirect_imports", False)
    assert guard.get("ignore_imports") == ["pytest_gpuperf.host -> pytest_gpuperf.host.cpu"]  # the dispatch alone
