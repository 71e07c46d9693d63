"""Perf tests newer than the base: the head's test files run on the base's code (``--gpuperf-base-tests``).

The placing on its own (real folders), then real sessions on real git repositories: a pull request that adds
a perf test for a function the base has is compared; one whose test imports a name only the head has says so,
test by test, and is not a pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from git_repo import git, init

from pytest_gpuperf.config import BaseTests
from pytest_gpuperf.engines.compare_ref.head_tests import defined_tests, missing_tests, place_head_tests, selected_tests

# -- which tests a base's file defines ----------------------------------------------------------------------

MODULE = """
import os
from helpers import test_imported

def test_a(gpu_bench): ...
async def test_async(): ...

class TestGroup:
    def test_one(self): ...

class TestInherited(Base):
    pass

test_assigned = make_test()
"""


def test_a_modules_top_level_names_are_its_tests() -> None:
    defined = defined_tests(MODULE)
    assert defined is not None
    assert defined["test_a"] == set() and defined["test_async"] == set() and defined["test_assigned"] == set()
    assert defined["TestGroup"] == {"test_one"} and defined["TestInherited"] is None
    assert defined["test_imported"] is None
    assert defined_tests("def test_a(:\n") is None


def test_missing_tests_are_named_as_in_test_ids(tmp_path: Path) -> None:
    base = tmp_path / "test_x.py"
    base.write_text(MODULE)
    wanted = selected_tests(["test_x.py::test_a[1-2]", "test_x.py::test_new", "test_x.py::TestGroup::test_one",
                         "test_x.py::TestGroup::test_two", "test_x.py::TestInherited::test_any",
                         "test_x.py::test_imported"])["test_x.py"]  # fmt: skip
    assert missing_tests(base, wanted) == ["TestGroup::test_two", "test_new"]
    base.write_text("def test_a(:\n")
    assert missing_tests(base, wanted) is None


# -- placing them ------------------------------------------------------------------------------------------


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def head_and_base(tmp_path: Path) -> tuple[Path, Path]:
    head = tree(tmp_path / "head", {
        "conftest.py": "# head root conftest\n",
        "pkg/__init__.py": "# head's package\n",
        "tests/conftest.py": "# head tests conftest\n",
        "tests/test_old.py": "def test_a(): ...\ndef test_b(): ...\n",
        "tests/test_same.py": "def test_s(): ...\n# the head's version\n",
        "tests/perf/__init__.py": "",
        "tests/perf/conftest.py": "# head perf conftest\n",
        "tests/perf/test_new.py": "def test_n(): ...\n",
    })  # fmt: skip
    base = tree(tmp_path / "base", {
        "conftest.py": "# base root conftest\n",
        "pkg/__init__.py": "# base's package\n",
        "tests/test_old.py": "def test_a(): ...\n",
        "tests/test_same.py": "def test_s(): ...\n# the base's version\n",
    })  # fmt: skip
    return head, base


IDS = ["tests/test_old.py::test_a", "tests/test_old.py::test_b", "tests/test_same.py::test_s",
       "tests/perf/test_new.py::test_n"]  # fmt: skip


def test_auto_places_the_files_the_base_lacks_or_lacks_a_test_of(head_and_base: tuple[Path, Path]) -> None:
    head, base = head_and_base
    placed = place_head_tests(head, base, IDS, BaseTests.AUTO)
    assert {path: f.why for path, f in placed.files.items()} == {
        "tests/perf/test_new.py": "the base has no tests/perf/test_new.py",
        "tests/test_old.py": "the base's tests/test_old.py has no test_b",
    }
    assert (base / "tests/test_old.py").read_text() == (head / "tests/test_old.py").read_text()
    assert "the base's version" in (base / "tests/test_same.py").read_text()  # defines every selected test
    # conftest files where the base has none, never over the base's; a new folder's __init__; never the package
    assert (base / "conftest.py").read_text() == "# base root conftest\n"
    assert (base / "tests/conftest.py").read_text() == "# head tests conftest\n"
    assert (base / "tests/perf/conftest.py").read_text() == "# head perf conftest\n"
    assert (base / "tests/perf/__init__.py").exists()
    assert (base / "pkg/__init__.py").read_text() == "# base's package\n"
    assert placed.note_for("tests/test_old.py::test_b") == (
        "the head's tests/test_old.py at the base: the base's tests/test_old.py has no test_b"
    )
    assert placed.note_for("tests/test_same.py::test_s") == ""


def test_head_places_every_selected_file_with_its_conftests(head_and_base: tuple[Path, Path]) -> None:
    head, base = head_and_base
    placed = place_head_tests(head, base, IDS, BaseTests.HEAD)
    assert set(placed.files) == {"tests/test_old.py", "tests/test_same.py", "tests/perf/test_new.py"}
    assert "the head's version" in (base / "tests/test_same.py").read_text()
    assert (base / "conftest.py").read_text() == "# head root conftest\n"
    assert (base / "pkg/__init__.py").read_text() == "# base's package\n"


def test_base_places_nothing(head_and_base: tuple[Path, Path]) -> None:
    head, base = head_and_base
    placed = place_head_tests(head, base, IDS, BaseTests.BASE)
    assert placed.files == {} and placed.copied == []
    assert not (base / "tests/perf").exists()


def test_a_path_outside_the_rootdir_is_never_written(head_and_base: tuple[Path, Path], tmp_path: Path) -> None:
    head, base = head_and_base
    (tmp_path / "elsewhere.py").write_text("def test_e(): ...\n")
    placed = place_head_tests(head, base, ["../elsewhere.py::test_e"], BaseTests.HEAD)
    assert placed.files == {} and not (base.parent / "elsewhere.py").read_text().startswith("# ")


# -- real sessions -----------------------------------------------------------------------------------------

PKG = """
WORK = {work}


def work():
    total = 0
    for i in range(WORK):
        total += i * i
    return total
"""
PKG_WITH_FAST_PATH = PKG + "\n\ndef fast_path():\n    return work()\n"

OLD_TEST = "from pkg import work\n\n\ndef test_old(gpu_bench):\n    gpu_bench(work)\n"
NEW_TEST = "from pkg import work\n\n\ndef test_new(gpu_bench):\n    gpu_bench(work)\n"
FAST_PATH_TEST = "from pkg import fast_path\n\n\ndef test_fast(gpu_bench):\n    gpu_bench(fast_path)\n"

ARGS = ("--gpuperf-compare-ref=HEAD~1", "--gpuperf-confirm-pairs=0", "--gpuperf-threshold=0.5",
        "--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.1", "--gpuperf-max-time=0.4",
        "--gpuperf-busy-policy=judge", "-p", "no:cacheprovider", "--gpuperf-json=results.json")  # fmt: skip


def two_commits(pytester: pytest.Pytester, base: dict[str, str], head: dict[str, str]) -> Path:
    root = pytester.path
    init(root)
    tree(root, {"conftest.py": "", **base})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    tree(root, head)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "head: the pull request")
    return root


def results(root: Path) -> dict[str, dict[str, Any]]:
    document = json.loads((root / "results.json").read_text())
    return {r["key"].split("::")[1]: r for r in document["results"]}


@pytest.mark.slow
def test_a_pull_request_that_adds_a_perf_test_for_a_function_the_base_has_is_compared(
    pytester: pytest.Pytester,
) -> None:
    # the pull request makes work() ten times slower and adds the first perf test of it
    root = two_commits(pytester, {"pkg/__init__.py": PKG.format(work=2000)},
                       {"pkg/__init__.py": PKG.format(work=20000), "tests/test_work.py": NEW_TEST})  # fmt: skip
    result = pytester.runpytest_subprocess(*ARGS, "tests", timeout=300)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*performance regression in tests/test_work.py::test_new::default*"])
    new = results(root)["test_new"]
    assert new["comparisons"][0]["verdict"] == "regression"
    notes = [n["text"] for n in new["measurement"]["notes"]]
    assert any(text.startswith("compared with HEAD~1 (") and text.endswith(
        "in alternating rounds; the head's tests/test_work.py at the base: the base has no tests/test_work.py")
        for text in notes), notes  # fmt: skip
    assert git(root, "worktree", "list").count("\n") == 0


@pytest.mark.slow
def test_a_test_importing_what_only_the_head_has_says_so_per_test_and_is_not_a_pass(
    pytester: pytest.Pytester,
) -> None:
    root = two_commits(
        pytester,
        {"pkg/__init__.py": PKG.format(work=2000), "tests/test_old.py": OLD_TEST},
        {"pkg/__init__.py": PKG_WITH_FAST_PATH.format(work=2000), "tests/test_fast.py": FAST_PATH_TEST,
         "tests/test_new.py": NEW_TEST},
    )  # fmt: skip
    result = pytester.runpytest_subprocess(*ARGS, "tests", timeout=300)
    measured = results(root)
    fast = measured["test_fast"]["comparisons"][0]
    assert fast["verdict"] == "not gated", fast
    assert fast["note"].startswith("not gated: test tests/test_fast.py::test_fast cannot run at HEAD~1: "
                                   "tests/test_fast.py could not be collected: ImportError: cannot import name "
                                   "'fast_path' from 'pkg'"), fast["note"]  # fmt: skip
    assert fast["note"].endswith("(the head's tests/test_fast.py at the base: the base has no tests/test_fast.py)")
    assert not any("compared with" in n["text"] for n in measured["test_fast"]["measurement"]["notes"])
    # the other new test, for a function the base has, and the base's own test are compared
    assert measured["test_new"]["comparisons"][0]["verdict"] == "unchanged"
    assert measured["test_old"]["comparisons"][0]["verdict"] == "unchanged"
    assert result.ret == 0
    result.stdout.fnmatch_lines(["gpuperf: 1 of 3 measurements could not be judged: 1 not gated (reference). They "
                                 "are not a pass: the base (HEAD~1) could not run some*"])  # fmt: skip
    strict = pytester.runpytest_subprocess(*ARGS, "tests", "--gpuperf-strict", timeout=300)
    strict.assert_outcomes(passed=2, failed=1)


@pytest.mark.slow
def test_a_test_added_to_a_file_the_base_has_runs_from_the_heads_version_of_it(pytester: pytest.Pytester) -> None:
    root = two_commits(
        pytester,
        {"pkg/__init__.py": PKG.format(work=2000), "tests/test_perf.py": OLD_TEST},
        {"pkg/__init__.py": PKG.format(work=20000), "tests/test_perf.py": OLD_TEST + NEW_TEST.split("\n", 1)[1]},
    )  # fmt: skip
    result = pytester.runpytest_subprocess(*ARGS, "tests", timeout=300)
    result.assert_outcomes(failed=2)
    measured = results(root)
    assert {name: r["comparisons"][0]["verdict"] for name, r in measured.items()} == {
        "test_old": "regression", "test_new": "regression"}  # fmt: skip
    own = pytester.runpytest_subprocess(*ARGS, "tests", "--gpuperf-base-tests=base", timeout=300)
    own.assert_outcomes(failed=1, passed=1)  # the old behaviour: the new test is new
    assert results(root)["test_new"]["comparisons"][0]["verdict"] == "new"


STRICT_INI = "[pytest]\naddopts = --strict-markers\nmarkers =\n    slowish: a marker the head registers\n"
MARKED_TEST = (
    "import pytest\nfrom pkg import work\n\n\n@pytest.mark.slowish\ndef test_new(gpu_bench):\n    gpu_bench(work)\n"
)


@pytest.mark.slow
def test_head_runs_the_base_with_the_heads_pytest_configuration(pytester: pytest.Pytester) -> None:
    # the head's test uses a marker only the head's ini registers, under --strict-markers
    root = two_commits(
        pytester,
        {"pkg/__init__.py": PKG.format(work=2000), "pytest.ini": "[pytest]\naddopts = --strict-markers\n"},
        {"pkg/__init__.py": PKG.format(work=2001), "pytest.ini": STRICT_INI, "tests/test_marked.py": MARKED_TEST},
    )  # fmt: skip
    auto = pytester.runpytest_subprocess(*ARGS, "tests", timeout=300)
    note = results(root)["test_new"]["comparisons"][0]["note"]
    assert auto.ret == 0 and "'slowish' not found in `markers` configuration option" in note, note
    head = pytester.runpytest_subprocess(*ARGS, "tests", "--gpuperf-base-tests=head", timeout=300)
    assert head.ret == 0, head.stdout.str()
    new = results(root)["test_new"]
    assert new["comparisons"][0]["verdict"] == "unchanged", new["comparisons"][0]
    assert any("the head's tests/test_marked.py at the base: --gpuperf-base-tests=head" in n["text"]
               for n in new["measurement"]["notes"])  # fmt: skip


def test_an_unknown_choice_is_a_usage_error_naming_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--gpuperf-base-tests=mine", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-base-tests must be one of auto, head, base, got 'mine'*"])
    pytester.makeini("[pytest]\ngpuperf_base_tests = theirs\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["*gpuperf_base_tests (ini) must be one of auto, head, base, got 'theirs'*"])


def test_a_base_file_that_does_not_parse_stays_the_bases(head_and_base: tuple[Path, Path]) -> None:
    head, base = head_and_base
    (base / "tests/test_old.py").write_text("def test_a(:\n")
    placed = place_head_tests(head, base, IDS, BaseTests.AUTO)
    assert "tests/test_old.py" not in placed.files
    assert (base / "tests/test_old.py").read_text() == "def test_a(:\n"


@pytest.mark.slow
def test_a_base_that_cannot_load_the_heads_conftest_names_the_copied_files(pytester: pytest.Pytester) -> None:
    # under head, the head's root conftest (which imports what only the head has) runs on the base's code
    two_commits(
        pytester,
        {"pkg/__init__.py": PKG.format(work=2000), "tests/test_old.py": OLD_TEST},
        {"pkg/__init__.py": PKG_WITH_FAST_PATH.format(work=2000), "conftest.py": "from pkg import fast_path\n"},
    )  # fmt: skip
    result = pytester.runpytest_subprocess(*ARGS, "tests", "--gpuperf-base-tests=head", timeout=300)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    output = result.stdout.str() + result.stderr.str()
    assert "It ran the head's conftest.py, tests/test_old.py on the base's code (--gpuperf-base-tests=head" in output
    assert "cannot import name 'fast_path'" in output


def test_a_conftest_shared_by_several_files_is_copied_once(head_and_base: tuple[Path, Path]) -> None:
    head, base = head_and_base
    placed = place_head_tests(head, base, IDS, BaseTests.HEAD)
    assert sorted(placed.copied) == sorted(set(placed.copied))
    assert placed.copied.count("tests/conftest.py") == 1 and placed.copied.count("conftest.py") == 1
