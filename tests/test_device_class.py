"""CPU device classes name the kernels torch dispatches to; older CPU folders migrate without losing entries."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from pytest_gpuperf.baseline.store import BaselineStore
from pytest_gpuperf.measure.env import cpu_kernels, device_class_for, expected_cpu_kernels
from pytest_gpuperf.model import BaselineEntry, Environment, Provenance, SampleStats, device_class

MODULE = "tests/test_mm.py"
LEGACY = "cpu-amd-epyc"


def test_a_cpu_class_names_its_kernels_and_splits_back() -> None:
    tag = device_class.kernel_tag("AVX512", {"avx512_bf16", "avx512f", "amx_bf16"})
    assert tag == "avx512-bf16-amxbf16"
    assert device_class.kernel_tag_of_isa("AVX512+avx512_bf16+amx_bf16") == tag
    assert device_class.kernel_tag("AVX2", set()) == "avx2"
    cls = device_class_for("cpu", "AMD EPYC", tag)
    assert cls == "cpu-amd-epyc--avx512-bf16-amxbf16"
    assert device_class.split(cls) == ("cpu-amd-epyc", tag)
    assert device_class.split(LEGACY) == (LEGACY, None)
    assert device_class_for("cuda", "NVIDIA H100", "ignored") == "cuda-nvidia-h100"  # a GPU's kernels are its model


def test_this_machines_class_follows_torchs_capability() -> None:
    capability = str(torch.backends.cpu.get_cpu_capability()).lower()
    assert cpu_kernels().split("-")[0] == capability
    assert expected_cpu_kernels() == cpu_kernels()  # the header's guess, before torch starts, is torch's choice


def test_the_torch_free_guess_follows_aten_cpu_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys

    code = "from pytest_gpuperf.measure.env import expected_cpu_kernels as e; import sys; "
    code += "print(e(), 'torch' in sys.modules)"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0].split("-")[0] == "default" and out[1] == "False"


def test_the_reason_names_the_kernels_on_each_side() -> None:
    why = device_class.why_not_comparable("cpu-amd-epyc--avx512-bf16", "cpu-amd-epyc--avx2")
    assert why == (
        "other CPU kernels: the baseline ran torch's avx512-bf16 kernels (cpu-amd-epyc--avx512-bf16), "
        "this run avx2 (cpu-amd-epyc--avx2)"
    )
    assert "before CPU kernels were part of it" in device_class.why_not_comparable(LEGACY, "cpu-amd-epyc--avx2")
    assert "another CPU" in device_class.why_not_comparable("cpu-intel-xeon--avx2", "cpu-amd-epyc--avx2")


def _entry(test: str, cpu_isa: str | None) -> BaselineEntry:
    samples = tuple(1000.0 * (1 + 0.01 * i) for i in range(-5, 6))
    extra = {"cpu_count": "2"} | ({"cpu_isa": cpu_isa} if cpu_isa else {})
    env = Environment(LEGACY, "cpu", "AMD EPYC", "AMD EPYC", "3.11.7", torch="2.13.0", extra=extra)
    return BaselineEntry(
        key=f"{MODULE}::{test}::default", stats=SampleStats.from_samples(samples), samples_ns=samples,
        calls_per_sample=8, device="cpu", timer="perf_counter", round_medians_ns=(1000.0, 1001.0), noise=0.01,
        environment=env, provenance=Provenance(commit="c" * 40), recorded_at="2026-11-01T00:00:00+00:00",
    )  # fmt: skip


def _legacy_store(root: Path) -> BaselineStore:
    """A folder written when a CPU class was the model name alone: one entry knows its kernels, one does not."""
    store = BaselineStore(root)
    store.update(LEGACY, [_entry("test_known", "AVX512+avx512_bf16"), _entry("test_unknown", None)])
    return BaselineStore(root)


def _all_keys(root: Path) -> list[str]:
    return sorted(e.key for _, _, e in BaselineStore(root).iter_entries())


def test_an_older_cpu_folder_is_read_in_the_class_of_its_recorded_kernels(tmp_path: Path) -> None:
    store = _legacy_store(tmp_path)
    avx512 = "cpu-amd-epyc--avx512-bf16"
    found = store.load(avx512, f"{MODULE}::test_known", "default")
    assert found is not None and found.environment is not None and found.environment.device_class == avx512
    assert store.load("cpu-amd-epyc--avx2", f"{MODULE}::test_known", "default") is None
    assert store.load(avx512, f"{MODULE}::test_unknown", "default") is None  # what ran there is unknown
    others = store.load_other_classes(f"{MODULE}::test_known", "default", exclude="cpu-amd-epyc--avx2")
    assert [e.environment.device_class for e in others if e.environment] == [avx512]


def test_writing_moves_entries_that_know_their_kernels_and_loses_none(tmp_path: Path) -> None:
    store = _legacy_store(tmp_path)
    before = _all_keys(tmp_path)
    here = "cpu-amd-epyc--avx2"
    written = _entry("test_new", "AVX2")
    assert written.environment is not None
    new = replace(written, environment=replace(written.environment, device_class=here))
    store.update(here, [new])
    assert _all_keys(tmp_path) == sorted([*before, new.key])
    moved = tmp_path / "cpu-amd-epyc--avx512-bf16" / "tests__test_mm.py.json"
    assert moved.is_file() and "test_known" in moved.read_text()
    legacy = (tmp_path / LEGACY / "tests__test_mm.py.json").read_text()
    assert "test_unknown" in legacy and "test_known" not in legacy
    assert BaselineStore(tmp_path).validate_tree() == []


FAST = ["--gpuperf-warmup-time=0.01", "--gpuperf-min-time=0.05", "--gpuperf-max-time=0.3", "-p", "no:cacheprovider"]


def test_a_baseline_written_where_other_kernels_ran_is_not_comparable(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = str(torch.backends.cpu.get_cpu_capability())
    if here == "DEFAULT":
        pytest.skip("torch runs its DEFAULT kernels here: there are no lower ones to write a baseline with")
    pytester.makepyfile(
        test_mm="import torch\n\ndef test_mm(gpu_bench):\n    a = torch.randn(64, 64)\n    gpu_bench(torch.mm, a, a)\n"
    )
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # torch's portable kernels, as on an older CPU
    pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *FAST).assert_outcomes(passed=1)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-explain", *FAST)
    result.assert_outcomes(passed=1)
    reason = f"*not comparable: other CPU kernels: the baseline ran torch's default*{here.lower()}*"
    result.stdout.fnmatch_lines([reason])
    assert "regression" not in result.stdout.str().replace("0 regressions", "")
