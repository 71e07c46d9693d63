"""benchmarks/gpu_session.sh on a machine without CUDA: its GPU steps skip cleanly, one line per step.

The checks it runs through benchmarks/gpu_checks.py run here on the CPU (``--device cpu``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_session.sh"
CHECKS = SCRIPT.with_name("gpu_checks.py")
# issue 47's items, most important first: the order a run cut short still covers the most of
STEPS = ["machine", "cuda_tests", "compare_ref", "benchmark_fixture", "history", "device_state", "why_cuda",
         "fidelity", "examples_record", "examples_rerun", "examples_planted", "full_suite"]  # fmt: skip
GPU_STEPS = [step for step in STEPS if step not in ("cuda_tests", "why_cuda")]

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the run without CUDA")


def session(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The script in the checkout; no wheels unless given (a checkout's .whl/ holds CPython 3.12 wheels)."""
    env = {"WHEELS": str(tmp_path / "no-wheels"), **env}
    return subprocess.run(["bash", str(SCRIPT)], cwd=SCRIPT.parents[1], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, **env})  # fmt: skip


def summary(out: str) -> dict[str, str]:
    lines = out.split("=== summary", 1)[1].splitlines()[1:]
    return {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines}


def test_without_cuda_gpu_steps_skip_and_the_rest_pass(tmp_path: Path) -> None:
    done = session(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = summary(done.stdout)
    assert list(lines) == STEPS
    no_cuda = "skipped, no CUDA (torch.cuda.is_available() is False)"
    for step in GPU_STEPS:
        assert lines[step] == no_cuda
    assert lines["why_cuda"].startswith("ok (exit 0, ")
    assert lines["why_cuda"].endswith("): why on CUDA: skipped, torch.cuda.is_available() is False")
    assert lines["cuda_tests"].startswith("ok (exit 0, ")
    assert " skipped in " in lines["cuda_tests"]
    with tarfile.open(tmp_path / "gpu-run.tgz") as tar:
        assert {"./why_cuda.json", "./why_cuda.log", "./cuda_tests.log"} <= set(tar.getnames())
    assert (tmp_path / "summary.txt").read_text().splitlines() == [f"{k}: {v}" for k, v in lines.items()]


def test_the_step_limits_fit_the_budget_with_room_for_the_optional_suite() -> None:
    """The limits named in the script's calls add up to at most its budget less the 15 s it keeps back."""
    text = SCRIPT.read_text()
    budget = int(text.split("BUDGET=${BUDGET:-", 1)[1].split("}", 1)[0])
    limits = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) > 2 and words[0] in ("step", "gpu_step") and words[1] in STEPS:
            limits[words[1]] = int(words[2])
    assert list(limits) == STEPS[:-1]  # every step but the optional suite, in order
    assert sum(limits.values()) <= budget - 15 <= 9 * 60


def test_a_step_past_the_budget_fails_and_says_so(tmp_path: Path) -> None:
    done = session(tmp_path, BUDGET="20", EXAMPLES="0", FULL_SUITE="0")
    assert done.returncode == 1
    lines = summary(done.stdout)
    assert lines["cuda_tests"] == "FAILED, skipped: no time left in the budget of 20s"
    assert lines["why_cuda"] == "FAILED, skipped: no time left in the budget of 20s"


def probe_wheel(folder: Path) -> None:
    """A minimal pure-Python wheel: one module, ``gpuperf_probe``."""
    folder.mkdir()
    info = "gpuperf_probe-1.0.dist-info"
    files = {
        "gpuperf_probe.py": "VALUE = 1\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: gpuperf-probe\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(folder / "gpuperf_probe-1.0-py3-none-any.whl", "w") as whl:
        for name, text in files.items():
            whl.writestr(name, text)
        whl.writestr(f"{info}/RECORD", "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"]))


def test_carried_wheels_are_installed_before_the_steps(tmp_path: Path) -> None:
    probe_wheel(tmp_path / "wheels")
    site = tmp_path / "site"
    done = session(tmp_path / "out", WHEELS=str(tmp_path / "wheels"), SITE=str(site), BUDGET="20", EXAMPLES="0",
                   FULL_SUITE="0")  # fmt: skip
    assert done.stdout.splitlines()[0] == f"wheels: 1 installed from {tmp_path / 'wheels'} into {site}"
    assert (site / "gpuperf_probe.py").read_text() == "VALUE = 1\n"
    assert "=== summary" in done.stdout


def check(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``gpu_checks.py ARGS --device cpu`` on small matrices, results in tmp_path/out."""
    return subprocess.run([sys.executable, str(CHECKS), *args, "--device", "cpu", "--n", "128", "--max-time", "0.3",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)  # fmt: skip


def test_the_benchmark_fixture_check_measures_both_functions(tmp_path: Path) -> None:
    done = check(tmp_path, "benchmark", "--min-ratio", "0", "--max-ratio", "1e6")  # CPU timing: no bounds
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "benchmark: ok"
    assert done.stdout.splitlines()[1].startswith("figure: benchmark fixture on cpu: plain ")
    results = json.loads((tmp_path / "out" / "benchmark.json").read_text())["results"]
    assert sorted(r["key"] for r in results) == ["test_bench.py::test_plain::benchmark",
                                                 "test_bench.py::test_synced::benchmark"]  # fmt: skip


def test_a_check_that_does_not_hold_says_failed_and_exits_1(tmp_path: Path) -> None:
    done = check(tmp_path, "benchmark", "--min-ratio", "1e6", "--max-ratio", "1e7")
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == "benchmark: FAILED"
    assert (tmp_path / "out" / "benchmark_pytest.log").exists()


def test_the_history_check_saves_the_environment_as_stored(tmp_path: Path) -> None:
    done = check(tmp_path, "history")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stored device_type=cpu, gpu_model=None, gpu_count=0, driver=None, cuda=None" in done.stdout
    saved = json.loads((tmp_path / "out" / "history_env.json").read_text())
    with sqlite3.connect(tmp_path / "out" / "history.sqlite") as db:
        (stored,) = db.execute("SELECT environment FROM gpuperf_runs").fetchone()
    assert saved["environment"] == json.loads(stored)


def test_the_device_state_check_on_the_cpu_reads_nothing_and_says_energy_was_not_measured(tmp_path: Path) -> None:
    done = check(tmp_path, "device_state", "--reference-s", "0.1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[1] == "figure: device state on cpu: none read, energy not measured (said so)"
    assert {"device_state.json", "device_state.html", "device.sqlite", "energy_reference.json",
            "device_state_pytest.log"} <= {p.name for p in (tmp_path / "out").iterdir()}  # fmt: skip


def _gpu_reading(energy_j: float, *, sm: float = 1980.0) -> tuple[dict, dict, dict | None, dict]:  # type: ignore[type-arg]
    """What a results file and the energy reference of a CUDA run hold: 4 samples of 1.5 ms at 600 W."""
    state = {"sm_clock_mhz": [sm, sm, 1965.0, sm], "mem_clock_mhz": [2619.0] * 4, "power_w": [600.0] * 4,
             "temperature_c": [50.0, 51.0, 52.0, 52.0], "reasons": [0, 4, 4, 0], "readings": 2,
             "reading_ns": 40_000.0, "summary": {"sm_clock_mhz": 1980.0}, "energy_source": "counter"}  # fmt: skip
    m = {"samples_ns": [1.5e6] * 4, "device_state": state}
    reference = {"loop_calls": 1000, "loop_s": 1.5, "loop_mj": 900_000, "measurement_mj": 2_000_000,
                 "measurement_calls": 1500}  # fmt: skip
    return m, state, {"name": "energy", "value": energy_j}, reference


def test_the_device_state_check_holds_energy_to_ten_percent_of_the_counter_and_readings_to_plausible() -> None:
    from benchmark_scripts import benchmark_script

    with benchmark_script("gpu_checks") as checks:
        judged = checks._judge_device_state
    stored, drawn = {"device.sm_clock", "device.power", "metric.energy"}, True
    ok, figure = judged(*_gpu_reading(0.93), stored, drawn)
    assert ok, figure
    assert figure.startswith("4 samples, 2 NVML readings at 40 us each; SM clock 1965-1980 MHz (median 1980.0), power "
                             "600-600 W, temperature 50-52 C; reasons seen: sw_power_cap; energy per call 0.93 J "
                             "(counter) vs 0.9 J by the counter around 1000 calls (+3.3%, within 10%)")  # fmt: skip
    assert not judged(*_gpu_reading(1.0), stored, drawn)[0]  # +11%
    assert "OUTSIDE 10%" in judged(*_gpu_reading(1.0), stored, drawn)[1]
    assert not judged(*_gpu_reading(0.9, sm=0.0), stored, drawn)[0]  # a clock of 0 MHz
    assert not judged(*_gpu_reading(0.9), {"device.sm_clock"}, drawn)[0]  # energy not kept
    assert not judged(*_gpu_reading(0.9), stored, False)[0]  # not drawn
    m, state, _, reference = _gpu_reading(0.9)
    ok, figure = judged(m, state, None, reference, stored, drawn)
    assert not ok and "energy per call not measured" in figure


def test_the_compare_ref_check_catches_the_planted_slowdown_and_passes_the_unchanged(tmp_path: Path) -> None:
    # the CPU's noise needs a larger planted change than the GPU's +5%
    done = check(tmp_path, "compare_ref", "--base-reps", "3", "--head-reps", "9", "--threshold", "0.2")
    assert done.returncode == 0, done.stdout + done.stderr
    figure = done.stdout.splitlines()[1]
    assert figure.startswith("figure: compare-ref on cpu: planted +200.0% read +"), figure
    assert "(regression, confirmed); unchanged " in figure and figure.endswith("fork errors: none"), figure


H100_FIDELITY = SCRIPT.with_name("results") / "gpu_fidelity_h100.json"


def test_the_fidelity_check_passes_the_h100_figures_and_states_the_small_kernels(tmp_path: Path) -> None:
    done = check(tmp_path, "fidelity", "--json", str(H100_FIDELITY))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[1] == (
        "figure: runner/kernel, large (>= 0.5 ms): copy 1024 MiB 1.004; bf16 mm 8192^3 1.002 (within 1.5%); "
        "small: copy 64 MiB 1.048; bf16 mm 2048^3 1.055; bf16 mm 4096^3 1.016"
    )


def test_the_fidelity_check_fails_a_large_kernel_read_2_percent_long(tmp_path: Path) -> None:
    results = json.loads(H100_FIDELITY.read_text())
    for row in results["rows"]:
        if row["case"] == "bf16 mm 8192^3":
            row["runner_ms"] = row["kernel_ms"] * 1.02
    planted = tmp_path / "fidelity.json"
    planted.write_text(json.dumps(results))
    done = check(tmp_path, "fidelity", "--json", str(planted))
    assert done.returncode == 1
    assert "bf16 mm 8192^3 1.020 (outside 1.5%: bf16 mm 8192^3)" in done.stdout


def test_the_machine_check_saves_versions_and_the_probe(tmp_path: Path) -> None:
    done = check(tmp_path, "machine")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("figure: cpu, driver not probed on the CPU, ")
    saved = json.loads((tmp_path / "out" / "machine.json").read_text())
    assert saved["versions"]["torch"] == torch.__version__


def test_an_optional_step_cut_at_its_limit_is_partial_a_required_one_failed(tmp_path: Path) -> None:
    """The script's own ``said`` and ``step`` functions, on a command that outlives its limit."""
    text = SCRIPT.read_text()
    functions = "".join(text[text.index(f"\n{name}() {{") : text.index("\n}\n", text.index(f"\n{name}() {{")) + 3]
                        for name in ("said", "step"))  # fmt: skip
    driver = f"""{functions}
RUN={tmp_path}; OUT={tmp_path}; BUDGET=100; status=0; summary=()
PARTIAL_OK=1 step optional 6 sleep 30
echo "status $status"
step required 6 sleep 30
echo "status $status"
"""
    done = subprocess.run(["bash", "-c", driver], capture_output=True, text=True, timeout=60)
    lines = [line for line in done.stdout.splitlines() if not line.startswith("===")]
    assert lines == ["optional: partial (exit 124, 6s): stopped at its limit of 6s; ", "status 0",
                     "required: FAILED (exit 124, 6s): stopped at its limit of 6s; ", "status 1"]  # fmt: skip


def test_the_compare_ref_check_without_git_says_so(tmp_path: Path) -> None:
    no_git = {**os.environ, "PATH": str(tmp_path)}
    args = [sys.executable, str(CHECKS), "compare_ref", "--device", "cpu", "--out", str(tmp_path)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, env=no_git)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == "figure: compare-ref needs git, and there is none on PATH"
