"""The header line of a measuring session (report/header.py and the plugin's pytest_report_header)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import git
import pytest

from pytest_gpuperf.config import GpuperfConfig, Mode
from pytest_gpuperf.measure.env import cpu_model, device_class_for, expected_cpu_kernels
from pytest_gpuperf.report.header import render_header, session_header, sm_clock
from tests.test_report_helpers import ENV

H100 = "NVIDIA H100 80GB HBM3"


def test_baseline_mode_names_device_clocks_and_folder() -> None:
    line = render_header(
        Mode.BASELINE, device="cuda:0", device_name=H100, sm_clock_mhz=1980,
        baseline_folder="baselines/cuda-nvidia-h100-80gb-hbm3",
    )  # fmt: skip
    assert line == (
        "gpuperf: baseline mode on cuda:0 (NVIDIA H100 80GB HBM3, sm clocks 1980 MHz) "
        "against baselines/cuda-nvidia-h100-80gb-hbm3"
    )


def test_compare_ref_mode_names_the_ref_and_its_commit() -> None:
    commit = "3f2a9c1b7d0e" + "5" * 28
    line = render_header(Mode.COMPARE_REF, device="cpu", device_name="AMD EPYC 9654", ref="origin/main",
                         ref_commit=commit)  # fmt: skip
    assert line == "gpuperf: compare-ref mode on cpu (AMD EPYC 9654) against origin/main (3f2a9c1b7d0e)"
    assert render_header(Mode.COMPARE_REF, device="cpu", ref="HEAD~1") == (
        "gpuperf: compare-ref mode on device cpu (probed at the first measurement) against HEAD~1"
    )


def test_update_mode_says_what_it_writes_and_locked_clocks_are_named() -> None:
    line = render_header(
        Mode.UPDATE, device="cuda:1", device_name=H100, sm_clock_mhz=1755, clocks_locked=True,
        baseline_folder="perf/baselines/cuda-nvidia-h100-80gb-hbm3",
    )  # fmt: skip
    assert line == (
        "gpuperf: update mode on cuda:1 (NVIDIA H100 80GB HBM3, sm clocks 1755 MHz locked) "
        "writing perf/baselines/cuda-nvidia-h100-80gb-hbm3"
    )


def test_smoke_mode_says_nothing_and_missing_values_are_errors() -> None:
    assert render_header(Mode.SMOKE, device="auto") is None
    with pytest.raises(ValueError, match="needs the ref"):
        render_header(Mode.COMPARE_REF, device="cpu")
    with pytest.raises(ValueError, match="baseline mode header needs the baseline folder"):
        render_header(Mode.BASELINE, device="cpu")


def test_the_clock_is_the_applications_clock_from_the_probe() -> None:
    assert sm_clock({"sm_clock_mhz": "345", "sm_app_clock_mhz": "1980", "clocks_locked": "no"}) == (1980, False)
    assert sm_clock({"sm_app_clock_mhz": "1755", "clocks_locked": "yes"}) == (1755, True)
    assert sm_clock({"nvml": "unavailable: no library"}) == (None, False)


def test_session_header_from_a_probed_environment(tmp_path: Path) -> None:
    config = GpuperfConfig(enabled=True, rootdir=tmp_path, baseline_dir=tmp_path / "perf" / "baselines")
    env = dataclasses.replace(ENV, extra={"sm_app_clock_mhz": "1980"})
    assert session_header(config, environment=env, device="cuda:0") == (
        f"gpuperf: baseline mode on cuda:0 ({H100}, sm clocks 1980 MHz) against perf/baselines/{ENV.device_class}"
    )
    assert session_header(GpuperfConfig(enabled=False, rootdir=tmp_path)) is None


def test_a_cpu_request_is_named_before_torch_starts(tmp_path: Path) -> None:
    config = GpuperfConfig(enabled=True, rootdir=tmp_path, baseline_dir=tmp_path / "baselines", device="cpu")
    folder = device_class_for("cpu", cpu_model(), expected_cpu_kernels())
    assert session_header(config) == f"gpuperf: baseline mode on cpu ({cpu_model()}) against baselines/{folder}"
    auto = GpuperfConfig(enabled=True, rootdir=tmp_path, baseline_dir=Path("/elsewhere/baselines"))
    assert session_header(auto) == (
        "gpuperf: baseline mode on device auto (probed at the first measurement) "
        "against /elsewhere/baselines/<device class>"
    )


def _repo(path: Path) -> str:
    repo = git.Repo.init(path)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@example.com")
    (path / "a.txt").write_text("a\n")
    repo.index.add(["a.txt"])
    return repo.index.commit("first").hexsha


def test_compare_ref_commit_is_looked_up_in_git_when_not_given(tmp_path: Path) -> None:
    sha = _repo(tmp_path)
    config = GpuperfConfig(enabled=True, rootdir=tmp_path, compare_ref="HEAD", device="cpu")
    assert session_header(config) == f"gpuperf: compare-ref mode on cpu ({cpu_model()}) against HEAD ({sha[:12]})"
    # the engine names a bad ref; the header just leaves the commit out
    bad = GpuperfConfig(enabled=True, rootdir=tmp_path, compare_ref="no-such-branch", device="cpu")
    assert str(session_header(bad)).endswith("against no-such-branch")
    given = GpuperfConfig(enabled=True, rootdir=tmp_path, compare_ref="main", device="cpu")
    assert str(session_header(given, ref_commit="f" * 40)).endswith(f"against main ({'f' * 12})")


NO_TORCH_TEST = """
import sys

def test_plain():
    assert "torch" not in sys.modules
"""


def test_the_plugin_prints_the_header_without_starting_torch(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=NO_TORCH_TEST)
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-device=cpu", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    folder = device_class_for("cpu", cpu_model(), expected_cpu_kernels())
    result.stdout.fnmatch_lines([f"gpuperf: baseline mode on cpu (*) against baselines/{folder}"])

    update = pytester.runpytest_subprocess("--gpuperf-update-baseline", "-p", "no:cacheprovider")
    update.assert_outcomes(passed=1)
    update.stdout.fnmatch_lines(["gpuperf: update mode on device auto (*) writing baselines/<device class>"])


def test_a_smoke_session_has_no_header(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=NO_TORCH_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "gpuperf:" not in result.stdout.str()


def test_the_compare_ref_header_names_the_base_commit(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=NO_TORCH_TEST.replace('assert "torch" not in sys.modules', "pass"))
    sha = _repo(pytester.path)
    with git.Repo(pytester.path) as repo:
        repo.index.commit("second")
    result = pytester.runpytest_subprocess("--gpuperf-compare-ref=HEAD~1", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"gpuperf: compare-ref mode on device auto (*) against HEAD~1 ({sha[:12]})"])
