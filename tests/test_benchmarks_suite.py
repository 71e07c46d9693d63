"""benchmarks/ as a suite: every script listed in its README, run from the repository root without
path hacks, and no imports between tests/ and benchmarks/ in either direction."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.iterdir() if p.suffix in (".py", ".sh") and not p.name.startswith("_"))


def imported(path: Path) -> set[str]:
    """The top-level names of the modules ``path`` imports (absolute imports, anywhere in the file)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def edits_sys_path(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "path"
            and isinstance(node.func.value.value, ast.Name)
            and node.func.value.value.id == "sys"
        ):
            return True
    return False


def test_the_readme_lists_every_benchmark_script() -> None:
    readme = (BENCHMARKS / "README.md").read_text()
    missing = [p.name for p in SCRIPTS if f"| `{p.name}` |" not in readme]
    assert not missing, f"benchmarks/README.md has no row for {missing}"
    listed = {line.split("`")[1] for line in readme.splitlines() if line.startswith("| `")}
    assert listed <= {p.name for p in SCRIPTS}, f"the README lists scripts that are gone: {listed}"


def test_no_benchmark_edits_sys_path_or_imports_a_module_of_tests() -> None:
    test_modules = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {"tests"}
    for script in BENCHMARKS.glob("*.py"):
        assert not edits_sys_path(script), f"{script.name} edits sys.path: import _common and siblings by name"
        crossing = imported(script) & test_modules
        assert not crossing, f"{script.name} imports {crossing} of tests/ (use _common.shared_test_helper)"


def test_no_test_imports_a_benchmark_script() -> None:
    scripts = {p.stem for p in BENCHMARKS.glob("*.py")} | {"benchmarks"}
    for test in (ROOT / "tests").rglob("*.py"):
        crossing = imported(test) & scripts
        assert not crossing, f"{test.relative_to(ROOT)} imports {crossing}: load a script with benchmark_scripts.py"


def test_the_path_checks_would_catch_a_hack(tmp_path: Path) -> None:
    hack = tmp_path / "hack.py"
    hack.write_text('import sys\nsys.path.insert(0, "tests")\nfrom profile_plants import MODELS\n')
    assert edits_sys_path(hack) and imported(hack) == {"sys", "profile_plants"}


@pytest.mark.parametrize(
    "script", [p for p in SCRIPTS if p.suffix == ".py" and imported(p) & ({s.stem for s in BENCHMARKS.glob("*.py")})],
    ids=lambda p: p.name,
)  # fmt: skip
def test_a_script_importing_its_siblings_runs_as_a_command_from_the_root(script: Path) -> None:
    """``python benchmarks/NAME.py`` finds _common and its siblings with nothing added to the path."""
    done = subprocess.run([sys.executable, str(script.relative_to(ROOT)), "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
