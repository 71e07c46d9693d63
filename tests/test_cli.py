from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import git
import pytest
from cli_helpers import run
from test_report_helpers import BASE_SESSION, ENV, HEAD_SESSION, make_session, timed

from pytest_gpuperf import __version__
from pytest_gpuperf.baseline import BaselineStore, entry_from_measurement
from pytest_gpuperf.cli import EXIT_INVALID_INPUT, EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, main
from pytest_gpuperf.report.results_json import load_results, write_results


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return write_results(tmp_path / "base.json", BASE_SESSION), write_results(tmp_path / "head.json", HEAD_SESSION)


@pytest.mark.parametrize(
    "command",
    [[], ["compare"], ["report"], ["history"], ["history", "ingest"], ["history", "changes"], ["history", "dashboard"],
     ["history", "baselines"], ["stability"], ["validate"]],
)  # fmt: skip
def test_help_for_every_command(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith(f"usage: gpuperf {' '.join(command)}".rstrip())


def test_usage_errors_exit_2(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    base, head = files
    assert main([]) == EXIT_USAGE
    assert main(["frobnicate"]) == EXIT_USAGE
    assert main(["compare", str(base), str(head), "--threshold", "five"]) == EXIT_USAGE
    assert "expected a fraction" in capsys.readouterr().err
    assert main(["compare", str(base), str(head), "--metric", "p42"]) == EXIT_USAGE
    assert "invalid choice: 'p42'" in capsys.readouterr().err


def test_compare_table_exits_1_on_regression(files: tuple[Path, Path]) -> None:
    base, head = files
    code, out, err = run("compare", str(base), str(head))
    assert code == EXIT_REGRESSION
    assert f"compared with {base}" in out.splitlines()[0]
    slower = next(line for line in out.splitlines() if "test_slower" in line)
    assert slower.split()[-1] == "regression" and "+50.0%" in slower
    assert "gpuperf: 1 regression, 1 improvement, 1 unchanged, 1 new, 0 not comparable" in out
    assert "tests/t.py::test_gone::default is in" in err


def test_compare_threshold_and_formats(files: tuple[Path, Path], tmp_path: Path) -> None:
    base, head = files
    assert run("compare", str(base), str(head), "--threshold", "0.9")[0] == EXIT_OK
    code, out, _ = run("compare", str(base), str(head), "--format", "markdown")
    assert code == EXIT_REGRESSION
    assert out.startswith("<!-- pytest-gpuperf-comment -->")
    target = tmp_path / "out" / "compared.json"
    code, out, _ = run("compare", str(base), str(head), "--format", "json", "-o", str(target))
    assert code == EXIT_REGRESSION and out == ""
    compared = load_results(target)
    assert compared.mode == "compare-files"
    assert compared.base_provenance == BASE_SESSION.provenance


def test_compare_invalid_input_exits_3_naming_the_file(files: tuple[Path, Path]) -> None:
    base, head = files
    doc = json.loads(head.read_text())
    doc["results"][1]["measurement"]["calls_per_sample"] = 0
    head.write_text(json.dumps(doc))
    code, out, err = run("compare", str(base), str(head))
    assert code == EXIT_INVALID_INPUT
    assert out == ""
    assert str(head) in err and "$.results[1].measurement.calls_per_sample" in err
    assert run("compare", str(base), str(head.with_name("missing.json")))[0] == EXIT_INVALID_INPUT


@pytest.mark.parametrize(
    ("fmt", "check"),
    [
        ("table", "gpuperf: 1 regression"),
        ("markdown", "<!-- pytest-gpuperf-comment -->"),
        ("html", "<!DOCTYPE html>"),
        ("benchmark-json", '"machine_info"'),
    ],
)
def test_report_formats(fmt: str, check: str, tmp_path: Path) -> None:
    results = write_results(tmp_path / "r.json", make_session())
    code, out, _ = run("report", str(results), "--format", fmt)
    assert code == EXIT_OK
    assert check in out
    target = tmp_path / f"report.{fmt}"
    assert run("report", str(results), "--format", fmt, "--output", str(target)) == (EXIT_OK, "", "")
    assert target.read_text() == out


def _baselines(root: Path) -> BaselineStore:
    store = BaselineStore(root)
    entries = [
        entry_from_measurement(
            timed(f"tests/test_{k}.py::test_{k}", 1000.0), ENV, HEAD_SESSION.provenance, noise=None, recorded_at=None
        )
        for k in ("a", "b")
    ]
    store.update(ENV.device_class, entries)
    return store


def test_validate(tmp_path: Path) -> None:
    root = tmp_path / "baselines"
    store = _baselines(root)
    code, out, _ = run("validate", str(root))
    assert (code, out) == (EXIT_OK, f"{root}: 2 file(s), 2 entries, all valid\n")
    bad = store.file_for(ENV.device_class, "tests/test_b.py::test_b")
    doc = json.loads(bad.read_text())
    doc["schema_version"] = "two"
    bad.write_text(json.dumps(doc))
    code, _, err = run("validate", str(root))
    assert code == EXIT_INVALID_INPUT
    assert str(bad) in err and "1 invalid file(s)" in err
    assert run("validate", str(tmp_path / "nowhere"))[0] == EXIT_INVALID_INPUT


def test_history(tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path)
    actor = git.Actor("t", "t@example.invalid")
    _baselines(tmp_path / "baselines")
    repo.git.add(A=True)
    repo.index.commit("baselines", author=actor, committer=actor)
    plot = tmp_path / "history.png"
    baselines = str(tmp_path / "baselines")
    code, out, _ = run("history", "baselines", "--baselines", baselines, "-k", "test_a", "--plot", str(plot))
    assert code == EXIT_OK
    assert out.startswith("1 measurement over 1 commit (p50)")
    assert plot.read_bytes().startswith(b"\x89PNG")
    # the spelling from before the history group is the same view
    assert run("history", "--baselines", baselines, "-k", "test_a") == run("history", "baselines", "--baselines",
                                                                        baselines, "-k", "test_a")  # fmt: skip
    assert run("history", "baselines", "--baselines", baselines, "--persist", "-1")[0] == EXIT_USAGE
    outside = tmp_path.parent / f"{tmp_path.name}-not-git"
    outside.mkdir()
    code, _, err = run("history", "baselines", "--baselines", str(outside))
    assert code == EXIT_INVALID_INPUT and "not inside a git repository" in err


def test_module_entry_point_in_a_subprocess(files: tuple[Path, Path]) -> None:
    base, head = files
    version = subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf", "--version"], capture_output=True, text=True, check=False
    )
    assert (version.returncode, version.stdout.strip()) == (0, f"gpuperf {__version__}")
    compared = subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf", "compare", str(base), str(head), "--format", "markdown"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert compared.returncode == EXIT_REGRESSION, compared.stderr
    assert "🔴 regression" in compared.stdout


NOT_A_NUMBER = "NaN or infinity is not a number a results file may hold"


HEADER = '"format": "pytest-gpuperf-results", "schema_version": '


@pytest.mark.parametrize(
    ("document", "json_path", "message"),
    [
        ('{' + HEADER + '5, "results": [{"calls": ' + "7" * 5000 + '}]}', "$.results[0].calls",
         "an integer of 5000 digits is out of range: not a number a results file may hold"),
        ('{' + HEADER + '4, "results": 5}', "$.results", "5 is not of type 'array'"),
        ('{' + HEADER + '4, "results": null}', "$.results", "None is not of type 'array'"),
        ('{' + HEADER + '1, "results": [{"comparisons": 5}]}', "$.results[0].comparisons",
         "5 is not of type 'array'"),
        ('{' + HEADER + '3, "results": ["x", {"measurement": []}]}', "$.results[0]", "'x' is not of type 'object'"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["compare", "report", "stability"])
def test_a_results_file_no_version_could_hold_exits_3_naming_file_and_path(
    files: tuple[Path, Path], document: str, json_path: str, message: str, command: str
) -> None:
    """Checked before an older version is upgraded: an upgrade never walks what it cannot (no TypeError)."""
    base, head = files
    head.write_text(document)
    code, _, err = run(command, *([str(base)] if command == "compare" else []), str(head))
    assert code == EXIT_INVALID_INPUT, err
    assert f"results file {head} at {json_path}: {message}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        (("measurement", "samples_ns", 0), float("nan"), NOT_A_NUMBER),
        (("measurement", "stats", "median_ns"), float("nan"), NOT_A_NUMBER),
        (("measurement", "round_medians_ns", 0), float("inf"), NOT_A_NUMBER),
        (("measurement", "stats", "median_ns"), 1e300, "is greater than the maximum"),
        (("measurement", "samples_ns", 0), 1e300, "is greater than the maximum"),
    ],
)
@pytest.mark.parametrize("command", ["compare", "report"])
def test_nan_infinity_or_an_absurd_time_in_a_results_file_exits_3_naming_file_and_path(
    files: tuple[Path, Path], where: tuple[str | int, ...], value: float, message: str, command: str
) -> None:
    base, head = files
    doc = json.loads(head.read_text())
    node = doc["results"][0]
    for part in where[:-1]:
        node = node[part]
    if isinstance(node, list) and not node:
        node.append(1.0)
    node[where[-1]] = value
    head.write_text(json.dumps(doc))  # Python writes NaN and Infinity bare, as a hand-edited file may hold them
    code, _, err = run(command, *([str(base)] if command == "compare" else []), str(head))
    assert code == EXIT_INVALID_INPUT, err
    json_path = "$.results[0]." + ".".join(str(p) for p in where[:-1]) + (
        f"[{where[-1]}]" if isinstance(where[-1], int) else f".{where[-1]}")  # fmt: skip
    assert str(head) in err and json_path in err and message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "cannot be read: not UTF-8 text (byte 0)"),
        (b"[" * 100_000 + b"]" * 100_000, "cannot be read: JSON nested too deeply to be a results file"),
    ],
)
@pytest.mark.parametrize("command", ["compare", "report"])
def test_a_results_file_that_is_not_text_or_nested_too_deeply_exits_3(
    files: tuple[Path, Path], tmp_path: Path, content: bytes, message: str, command: str
) -> None:
    base, _ = files
    bad = tmp_path / "bin.json"
    bad.write_bytes(content)
    code, out, err = run(command, *([str(base)] if command == "compare" else []), str(bad))
    assert code == EXIT_INVALID_INPUT, err  # never 1, which for compare means "regression found"
    assert err == f"gpuperf {command}: results file {bad}: {message}\n" and out == ""


def test_a_results_file_is_read_no_further_than_its_size_limit(tmp_path: Path) -> None:
    from pytest_gpuperf.report.results_json import MAX_BYTES

    code, _, err = run("report", "/dev/zero")  # endless: refused after MAX_BYTES, not read until memory runs out
    assert code == EXIT_INVALID_INPUT
    assert err == f"gpuperf report: results file /dev/zero: cannot be read: larger than {MAX_BYTES // 2**20} MiB, " \
                  "the most a results file may hold\n"  # fmt: skip
    big = tmp_path / "big.json"
    with big.open("wb") as f:  # a sparse file one byte over the limit
        f.truncate(MAX_BYTES + 1)
    assert run("report", str(big))[0] == EXIT_INVALID_INPUT


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "-1", "many"])
def test_a_bad_noise_multiplier_is_a_usage_error(
    files: tuple[Path, Path], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = files
    assert main(["compare", str(base), str(head), f"--noise-multiplier={value}"]) == EXIT_USAGE
    assert "--noise-multiplier: expected a finite number >= 0" in capsys.readouterr().err
