from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch

from pytest_gpuperf.measure.env import describe_drift, device_class_for, probe_environment, slug


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
