"""Safe file names: readable where possible, never outside the root, never colliding."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpuperf.baseline.naming import (
    HASH_CHARS,
    MAX_SLUG_CHARS,
    device_class_dir,
    module_file_name,
    module_of,
    safe_name,
)
from pytest_gpuperf.baseline.store import BaselineStore
from pytest_gpuperf.errors import BaselineError
from pytest_gpuperf.model import BaselineEntry, SampleStats

SAFE = re.compile(r"[a-z0-9._~-]+")

NASTY = [
    "tests/test_mm.py",
    "tests__test_mm.py",
    "tests/_test_mm.py",
    "tests_/test_mm.py",
    "Tests/test_mm.py",
    "tests/test_MM.py",
    "../../etc/passwd",
    "..",
    ".",
    "...",
    "",
    "/",
    "//",
    "/abs/path/test_x.py",
    "tests\\windows\\test_x.py",
    "tests/../test_x.py",
    "tests/./test_x.py",
    ".hidden.py",
    "-rf.py",
    "trailing.",
    "con.py",
    "CON",
    "nul",
    "aux.json",
    "com1.py",
    "lpt9",
    "nul\x00byte.py",
    "tests/tëst_ünïcode.py",
    "tests/test_ünïcode.py",
    "tests/テスト.py",
    "tests/😀.py",
    "tests/\ud800surrogate.py",
    "tests/tab\tand\nnewline.py",
    "a" * 300,
    "a" * 301,
    "a" * MAX_SLUG_CHARS,
    "a" * (MAX_SLUG_CHARS + 1),
    "tests/" + "deep/" * 80 + "test_x.py",
    "tests/" + "deep/" * 80 + "test_y.py",
    "x~0123456789abcdef",
    "with space.py",
    "semi;colon|pipe*star?.py",
    "quote\"and'apos.py",
    "percent%2Fslash.py",
    "tests/test_x.py~1",
]


def test_plain_names_stay_readable() -> None:
    assert safe_name("tests/perf/test_matmul.py") == "tests__perf__test_matmul.py"
    assert module_file_name("tests/perf/test_matmul.py") == "tests__perf__test_matmul.py.json"
    assert device_class_dir("cuda-nvidia-a100-sxm4-80gb") == "cuda-nvidia-a100-sxm4-80gb"
    assert safe_name("test_mm.py") == "test_mm.py"


@pytest.mark.parametrize("text", ["Tests/x.py", "../x.py", "con.py", "a" * 300, "tests/ü.py", "a__b.py"])
def test_lossy_names_carry_a_hash(text: str) -> None:
    name = safe_name(text)
    slug, _, digest = name.rpartition("~")
    assert re.fullmatch(f"[0-9a-f]{{{HASH_CHARS}}}", digest)
    assert len(slug) <= MAX_SLUG_CHARS


def test_names_are_safe_and_distinct() -> None:
    names = {text: safe_name(text) for text in NASTY}
    assert len(set(names.values())) == len(NASTY)
    lowered = {n.lower() for n in names.values()}  # case-insensitive file systems
    assert len(lowered) == len(NASTY)
    for text, name in names.items():
        assert SAFE.fullmatch(name), (text, name)
        assert name not in {".", ".."}
        assert not name.startswith((".", "-")), (text, name)
        assert not name.endswith("."), (text, name)
        assert len(module_file_name(text)) + len(".lock") + 2 + 2 * HASH_CHARS < 255
        assert name.split(".")[0] not in {"con", "prn", "aux", "nul", "com1", "lpt9"}
    assert safe_name("tests/test_x.py") == safe_name("tests/test_x.py")  # stable


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=2, max_size=30, unique=True))
def test_random_texts_never_collide(texts: list[str]) -> None:
    names = [safe_name(t) for t in texts]
    assert len(set(names)) == len(texts)
    assert all(SAFE.fullmatch(n) and not n.startswith(".") for n in names)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab_/.", min_size=1, max_size=12), st.text(alphabet="ab_/.", min_size=1, max_size=12))
def test_underscore_and_slash_mixtures_never_collide(first: str, second: str) -> None:
    if first != second:
        assert safe_name(first) != safe_name(second)


def test_hundreds_of_nasty_ids_stay_inside_the_root(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "baselines")
    root = Path(os.path.normpath(store.root))
    modules = [m for m in NASTY if m]
    ids = [f"{m}::test_{i}[{m}]" for i, m in enumerate(modules)]
    ids += [f"tests/p{i}/{'x' * (i % 7)}/../{chr(0x400 + i)}.py::t" for i in range(300)]
    classes = ["cuda-a100", "../../escape", "CUDA A100", "cuda/a100", "\x00", "é" * 200]
    paths = set()
    for device_class in classes:
        for test_id in ids:
            path = store.file_for(device_class, test_id)
            resolved = Path(os.path.normpath(path))
            assert resolved.parent.parent == root, (device_class, test_id)
            paths.add(path)
    distinct_modules = {module_of(t) for t in ids}
    assert len(paths) == len(classes) * len(distinct_modules)


def entry(key: str) -> BaselineEntry:
    samples = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    return BaselineEntry(key, SampleStats.from_samples(samples), samples, 1, "cpu", "perf_counter")


def test_nasty_names_work_on_disk(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "baselines")
    written = []
    for i, module in enumerate(m for m in NASTY if m and "\ud800" not in m):
        store.update("cuda/../a100", [entry(f"{module}::test_{i}::default")])
        written.append(f"{module}::test_{i}::default")
    fresh = BaselineStore(store.root)
    assert fresh.validate_tree() == []
    assert sorted(e.key for _, _, e in fresh.iter_entries()) == sorted(written)
    assert [p.parent for p in store.root.rglob("*.json")] == [store.root / device_class_dir("cuda/../a100")] * len(
        written
    )


def test_module_of() -> None:
    assert module_of("tests/test_x.py::TestA::test_b[x::y]") == "tests/test_x.py"
    assert module_of("tests/test_x.py::t::default") == "tests/test_x.py"
    assert module_of("test_x.py") == "test_x.py"
    with pytest.raises(ValueError, match="empty"):
        module_of("::test")
    with pytest.raises(ValueError, match="empty"):
        device_class_dir("")


def test_a_lone_surrogate_cannot_be_written(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "baselines")
    with pytest.raises(BaselineError, match="cannot encode the file as UTF-8"):
        store.update("cpu", [entry("tests/\ud800.py::t::default")])
    assert not [
        p for p in store.root.rglob("*") if p.is_file() and p.name != ".gitignore" and not p.name.endswith(".lock")
    ]
