"""The package's layering, checked by import-linter's contracts in pyproject.toml."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parent.parent


def required(module: str) -> ModuleType:
    """``module`` imported; a test that needs it fails without it (the contracts never skip)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        pytest.fail(f"{module} is not installed: pip install import-linter (in the dev extra and every tox env)")


def test_no_lower_layer_imports_an_upper_one_and_the_gpu_path_skips_the_cpu_guard() -> None:
    required("importlinter")
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
    """Every module a contract names, a container's layers prefixed with the container."""
    import re

    names: set[str] = set()
    for contract in contracts():
        prefixes = [f"{c}." for c in contract.get("containers", ())] or [""]
        for key in ("layers", "modules"):
            for entry in contract.get(key, ()):
                for name in re.split(r"\s*[|:]\s*", entry.strip()):
                    names |= {prefix + name for prefix in prefixes}
    return names


def rooms_and_modules() -> tuple[set[str], set[str]]:
    """The package's subpackages (rooms) and every module in them, Alembic's script folder left out."""
    import pkgutil

    import pytest_gpuperf

    rooms, modules = {"pytest_gpuperf"}, set()
    for info in pkgutil.walk_packages(pytest_gpuperf.__path__, "pytest_gpuperf."):
        modules.add(info.name)
        if info.ispkg:
            rooms.add(info.name)
    return rooms, modules


def test_every_module_of_the_package_sits_in_a_layer_of_its_room() -> None:
    _, modules = rooms_and_modules()
    named = named_in_contracts()
    # each module is named by the contract of the room that holds it: the root's in the top one
    missing = sorted(m for m in modules if m not in named)
    assert not missing, f"not in any import-linter contract of pyproject.toml: {missing}"


def test_the_package_root_holds_at_most_ten_modules_beside_its_rooms() -> None:
    import pkgutil

    import pytest_gpuperf

    modules = [m.name for m in pkgutil.iter_modules(pytest_gpuperf.__path__) if not m.ispkg]
    assert len(modules) + 1 <= 10, f"{len(modules)} modules and __init__ at the top level: {sorted(modules)}"


def test_every_room_says_what_it_may_import() -> None:
    import importlib

    rooms, _ = rooms_and_modules()
    for room in sorted(rooms - {"pytest_gpuperf"}):
        doc = importlib.import_module(room).__doc__ or ""
        assert "May import" in doc or "may import" in doc, f"{room}'s docstring does not say what it may import"


def test_the_contracts_count_imports_made_for_the_type_checker() -> None:
    import tomllib

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert settings.get("exclude_type_checking_imports", False) is False  # True would leave them out


def test_the_cpu_guard_contract_checks_indirect_imports() -> None:
    (guard,) = [c for c in contracts() if c.get("forbidden_modules") == ["pytest_gpuperf.measure.host.cpu"]]
    assert not guard.get("allow_indirect_imports", False)
    assert guard.get("ignore_imports") == [
        "pytest_gpuperf.measure.host -> pytest_gpuperf.measure.host.cpu"
    ]  # the dispatch alone


def import_cycles(package: str) -> list[list[str]]:
    """The groups of ``package``'s modules that import each other in a circle (strongly connected components).

    Every import counts: inside functions and under ``TYPE_CHECKING`` too, so a
    circle that only the type checker sees is one here.
    """
    grimp = required("grimp")  # import-linter's graph library
    graph = grimp.build_graph(package, exclude_type_checking_imports=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & graph.modules for m in graph.modules}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm; the package is a few hundred modules deep at most
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in edges[module]:
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(edges):
        if module not in order:
            visit(module)
    return cycles


def test_no_modules_of_the_package_import_each_other_in_a_circle_even_for_the_type_checker() -> None:
    assert import_cycles("pytest_gpuperf") == []


def test_the_cycle_check_finds_a_circle_that_only_the_type_checker_sees(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        **{
            "circle/__init__": "",
            "circle/state": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circle.plugin import S\n",
            "circle/plugin": "from circle.state import KEY\nclass S: ...\n",
        }
    )
    monkeypatch.syspath_prepend(pytester.path)
    assert import_cycles("circle") == [["circle.plugin", "circle.state"]]


def test_the_contracts_fail_rather_than_skip_without_import_linter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "importlinter", None)  # None in sys.modules: the import raises ImportError
    with pytest.raises(pytest.fail.Exception, match="importlinter is not installed"):
        required("importlinter")
