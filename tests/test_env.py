from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import shutil
from pathlib import Path

import pytest
import torch

from pytest_gpuperf.measure.env import (
    DRIFT_FACTS,
    EnvChange,
    cpu_governor,
    describe_drift,
    device_class_for,
    distribution_version,
    environment_changes,
    format_cudnn_version,
    probe_environment,
    slug,
)
from pytest_gpuperf.model import Environment


def test_slug_and_device_class() -> None:
    assert slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert slug("  ../\\ ") == "unknown"
    assert device_class_for("cuda", "NVIDIA H200") == "cuda-nvidia-h200"


def test_probe_environment_on_cpu() -> None:
    env = probe_environment(torch.device("cpu"))
    assert env.device_type == "cpu"
    assert env.device_class.startswith("cpu-")
    assert env.torch == torch.__version__
    assert env.cuda is None and env.driver is None


def test_drift_names_changed_versions_only_within_a_class() -> None:
    here = probe_environment(torch.device("cpu"))
    assert describe_drift(here, here) is None
    assert describe_drift(None, here) is None
    older = dataclasses.replace(here, torch="2.0.0")
    assert describe_drift(older, here) == f"environment changed since the baseline: torch 2.0.0 -> {here.torch}"
    other_class = dataclasses.replace(older, device_class="cpu-something-else")
    assert describe_drift(other_class, here) is None


def test_drift_names_other_cpu_kernels_under_the_same_model_name() -> None:
    here = probe_environment(torch.device("cpu"))
    assert here.extra["cpu_isa"].split("+")[0] == torch.backends.cpu.get_cpu_capability()
    without_bf16 = dataclasses.replace(here, extra={**here.extra, "cpu_isa": "AVX2"})
    assert describe_drift(without_bf16, here) == (
        f"environment changed since the baseline: CPU kernels AVX2 -> {here.extra['cpu_isa']}"
    )
    unrecorded = dataclasses.replace(here, extra={k: v for k, v in here.extra.items() if k != "cpu_isa"})
    assert describe_drift(unrecorded, here) is None  # an entry written before it was recorded


def test_the_cpu_probe_records_the_governor_where_the_kernel_exposes_it(tmp_path: Path) -> None:
    env = probe_environment(torch.device("cpu"))
    assert env.extra.get("cpu_governor") == cpu_governor()  # absent on a VM without cpufreq, as the file is
    governor = tmp_path / "scaling_governor"
    governor.write_text("performance\n")
    assert cpu_governor(governor) == "performance"
    assert cpu_governor(tmp_path / "missing") is None


def test_versions_come_from_installed_distributions_without_importing_them() -> None:
    assert distribution_version(["no-such-distribution-gpuperf", "numpy"]) == importlib.metadata.version("numpy")
    assert distribution_version(["no-such-distribution-gpuperf"]) is None


@pytest.mark.parametrize(("raw", "spelled"), [(90100, "9.1.0"), (91002, "9.10.2"), (8907, "8.9.7"), (7605, "7.6.5")])
def test_cudnn_versions_as_cudnn_spells_them(raw: int, spelled: str) -> None:
    assert format_cudnn_version(raw) == spelled


GPU = Environment(
    device_class="cuda-nvidia-h100-80gb-hbm3", device_type="cuda", device_name="NVIDIA H100 80GB HBM3",
    cpu_model="AMD EPYC 9654", python="3.11.7", torch="2.5.1", cuda="12.4", driver="550.54.15",
    extra={"cudnn": "9.1.0", "cublas": "12.4.5.8", "triton": "3.1.0", "sm_app_clock_mhz": "1755",
           "power_limit_w": "700", "sm_clock_mhz": "345", "temperature_c": "31"},
)  # fmt: skip


def test_changes_name_each_fact_that_moved_in_a_fixed_order_with_its_unit() -> None:
    later = dataclasses.replace(
        GPU,
        driver="560.35.03",
        torch="2.6.0",
        extra={
            **GPU.extra,
            "cublas": "12.6.4.1",
            "power_limit_w": "500",
            "sm_clock_mhz": "1980",
            "temperature_c": "60",
        },
    )
    assert environment_changes(GPU, later) == (
        EnvChange("driver", "550.54.15", "560.35.03"),
        EnvChange("torch", "2.5.1", "2.6.0"),
        EnvChange("cuBLAS", "12.4.5.8", "12.6.4.1"),
        EnvChange("power limit", "700", "500", " W"),
    )  # the current clock and the temperature move with the load: no drift
    assert str(environment_changes(GPU, later)[-1]) == "power limit 700 W -> 500 W"
    assert describe_drift(GPU, later) == (
        "environment changed since the baseline: driver 550.54.15 -> 560.35.03, torch 2.5.1 -> 2.6.0, "
        "cuBLAS 12.4.5.8 -> 12.6.4.1, power limit 700 W -> 500 W"
    )


def test_a_fact_one_side_did_not_record_is_no_change() -> None:
    older = dataclasses.replace(GPU, extra={k: v for k, v in GPU.extra.items() if k not in ("cudnn", "triton")})
    newer = dataclasses.replace(GPU, extra={**GPU.extra, "cudnn": "9.5.0", "triton": "3.2.0"})
    assert environment_changes(older, newer) == ()
    assert [fact.label for fact in DRIFT_FACTS][:7] == [
        "driver",
        "CUDA runtime",
        "HIP",
        "torch",
        "cuDNN",
        "cuBLAS",
        "triton",
    ]


from perf_project import SHORT as FAST  # noqa: E402


def test_other_device_class_is_visible_and_fails_only_when_strict(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_env="def test_noop(gpu_bench):\n    gpu_bench(lambda: None)\n")
    pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *FAST).assert_outcomes(passed=1)
    (path,) = (pytester.path / "baselines").rglob("*.json")
    # The same file as if recorded on another runner type.
    other = pytester.path / "baselines" / "cuda-nvidia-a100-sxm4-80gb"
    other.mkdir()
    document = json.loads(path.read_text())
    document["device_class"] = "cuda-nvidia-a100-sxm4-80gb"
    for entry in document["entries"].values():
        entry["environment"]["device_class"] = "cuda-nvidia-a100-sxm4-80gb"
    (other / path.name).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    shutil.rmtree(path.parent)

    relaxed = pytester.runpytest_subprocess("--gpuperf", *FAST)
    relaxed.assert_outcomes(passed=1)
    relaxed.stdout.fnmatch_lines(["*not comparable*", "*gpuperf notes*", "*cuda-nvidia-a100-sxm4-80gb*"])

    strict = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-strict", *FAST)
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*not comparable*"])
