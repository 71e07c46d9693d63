"""``gpuperf comment``: one comment from the results files of a matrix's jobs (cli/comment.py, report/matrix.py).

The columns come from real CPU runs of a small perf project, with device classes as a matrix over CPU
kernels gives them (``ATEN_CPU_CAPABILITY``), and from hand-written CUDA-shaped results
(tests/data/matrix/: an H100 gated against its base, an A100 against baselines recorded under an older
driver and torch), each read through the results schema.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from perf_project import GATE, make_project
from test_report_matrix import _rows, _text, github_html, regression_sections

from pytest_gpuperf.measure.env import cpu_isa
from pytest_gpuperf.report.matrix import COMMENT_LIMIT, utf16_units
from pytest_gpuperf.report.results_json import load_results
from tests.cli_helpers import run

DATA = Path(__file__).parent / "data" / "matrix"
H100, A100 = DATA / "cuda-h100.json", DATA / "cuda-a100.json"
LINK = "https://github.com/o/r/actions/runs/7"


def test_the_recorded_cuda_payloads_pass_the_results_schema() -> None:
    h100, a100 = load_results(H100), load_results(A100)
    assert (h100.environment.device_type, a100.environment.device_type) == ("cuda", "cuda")
    assert {"cudnn", "cublas", "triton", "power_limit_w", "sm_app_clock_mhz"} <= set(a100.environment.extra)
    assert all(r.baseline is not None and r.baseline.environment is not None for r in a100.results)
    assert json.loads(H100.read_text())["repro_args"] == ["-p", "no:randomly", "--gpuperf-threshold=0.02",
                                                          "--gpuperf-l2-flush"]  # fmt: skip


@pytest.fixture
def cpu_matrix(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two real CPU runs whose device classes differ as a matrix over torch's CPU kernels makes them differ.

    The native kernels' class has baselines and runs three times the work: a regression with its profile.
    The portable kernels' class (ATEN_CPU_CAPABILITY=default) has none: every measurement not comparable.
    """
    if cpu_isa().split("+")[0] == "DEFAULT":
        pytest.skip("this CPU's native kernels are torch's portable ones: one class only")
    project = make_project(pytester)
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *GATE).assert_outcomes(passed=2)
    native, portable = project.path / "native.json", project.path / "portable.json"
    monkeypatch.setenv("DEMO_REPS", "12")
    project.runpytest_subprocess("--gpuperf", *GATE, f"--gpuperf-json={native}").assert_outcomes(passed=1, failed=1)
    monkeypatch.setenv("DEMO_REPS", "4")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    project.runpytest_subprocess("--gpuperf", *GATE, f"--gpuperf-json={portable}").assert_outcomes(passed=2)
    return native, portable


def test_four_results_files_make_one_comment(cpu_matrix: tuple[Path, Path], tmp_path: Path) -> None:
    native, portable = cpu_matrix
    artifact = tmp_path / "gpuperf-perf-gpu-h100-1a2b3c4d"  # a downloaded artifact: a folder with results.json
    artifact.mkdir()
    shutil.copy(H100, artifact / "results.json")
    code, text, err = run("comment", str(native), str(portable), str(artifact), str(A100),
                          "--job", "perf (gpu=l4)=cancelled", "--link", LINK)  # fmt: skip
    assert (code, err) == (0, "")
    assert utf16_units(text) <= COMMENT_LIMIT
    page = github_html(text)
    rows = _rows(next(page.iter("table")))
    classes = [load_results(p).environment.device_class for p in (native, portable, H100, A100)]
    assert rows[0] == ["test", *sorted(classes), "perf (gpu=l4) 🚫 job cancelled"]
    assert all(len(row) == 6 for row in rows)
    matmul = next(row for row in rows if row[0] == "test_perf.py::test_matmul")
    by_class = dict(zip(rows[0][1:], matmul[1:], strict=True))
    assert by_class[classes[0]].startswith("🔴 +")  # the native CPU class: three times the work
    assert by_class[classes[1]] == "🟡 not comparable"  # said so, not a pass
    assert by_class[classes[2]] == "⚪ +0.3%" and by_class[classes[3]] == "🔴 +17.0%"
    attention = next(row for row in rows if row[0] == "test_perf.py::test_attention[bf16-4096]")
    assert [attention[1 + sorted(classes).index(c)] for c in classes[:2]] == ["–", "–"]  # not run on a CPU
    # every regression: its evidence, the command that reproduces it, and why it got slower
    sections = regression_sections(page)
    assert len(sections) == 1 + 2 + 5
    for section in sections:
        (command,) = [_text(p) for p in section.iter("pre") if p.attrib.get("lang") == "sh"]
        assert command.startswith("pytest ") and "--gpuperf-device=" in command
        assert list(section.iter("table")), _text(section)  # the differential profile's table
    native_section = next(s for s in sections if classes[0] in _text(s.find("summary")))
    (command,) = [_text(p) for p in native_section.iter("pre")]
    assert command == ("pytest test_perf.py::test_matmul --gpuperf --gpuperf-device=cpu -p no:cacheprovider "
                       "--gpuperf-threshold=0.25 --gpuperf-min-time=0.1 --gpuperf-max-time=0.6 "
                       "--gpuperf-busy-policy=judge")  # fmt: skip
    # the driver and torch change since the A100's baselines, and its likely cause
    items = [_text(li) for li in page.iter("li") if li.find("ul") is None]
    assert (
        "environment changed since the baseline: driver 550.54.15 -> 560.35.03, torch 2.5.1+cu124 -> 2.6.0+cu124, "
        "triton 3.1.0 -> 3.2.0"
    ) in items
    assert sum("the environment is the likelier cause than the code" in item for item in items) == 1
    assert any(re.match(r"⚠️ 1 of 1 measurement could not be judged: 1 not comparable", item) for item in items)


def test_a_job_and_a_file_named_wrong_are_refused(tmp_path: Path) -> None:
    assert run("comment", str(H100), "--job", "perf (gpu=l4)")[0] == 2
    code, _, err = run("comment", str(H100), "--job", "l4=Cancelled!")
    assert code == 2 and "'Cancelled!' is not a job's conclusion" in err
    bad = tmp_path / "results.json"
    bad.write_text('{"format": "pytest-gpuperf-results", "schema_version": 6}')
    code, _, err = run("comment", str(H100), str(tmp_path))
    assert code == 3 and str(bad) in err
    assert run("comment", str(H100), "--limit", "100")[0] == 2


def test_the_comment_goes_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "comment.md"
    assert run("comment", str(H100), "-o", str(out)) == (0, "", "")
    assert out.read_text().startswith("<!-- pytest-gpuperf-matrix-comment -->\n## pytest-gpuperf · 1 device\n")
