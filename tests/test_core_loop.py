"""The loop a new user lives in, through real pytest runs of the real plugin (issue 2's "done when")."""

from __future__ import annotations

import json

import pytest

from tests.perf_project import GATE, make_project


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_project(pytester)


def test_smoke_mode_calls_once_and_writes_nothing(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert not (project.path / "baselines").exists()


def test_update_then_unchanged_then_regression(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    updated = project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *GATE)
    updated.assert_outcomes(passed=2)
    files = list((project.path / "baselines").rglob("*.json"))
    assert len(files) == 1, files
    document = json.loads(files[0].read_text())
    assert any("test_matmul" in key for key in document["entries"]), document["entries"].keys()
    updated.stdout.fnmatch_lines(["*baseline added*test_matmul*"])

    unchanged = project.runpytest_subprocess("--gpuperf", *GATE)
    unchanged.assert_outcomes(passed=2)

    monkeypatch.setenv("DEMO_REPS", "12")  # three times the real work
    slower = project.runpytest_subprocess("--gpuperf", *GATE)
    assert slower.ret == 1
    slower.assert_outcomes(passed=1, failed=1)
    slower.stdout.fnmatch_lines(["*test_matmul*regression*"])
    assert "Traceback" not in slower.stdout.str()


def test_baseline_untouched_without_update_flag(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *GATE).assert_outcomes(passed=2)
    (path,) = (project.path / "baselines").rglob("*.json")
    before = path.read_bytes()
    monkeypatch.setenv("DEMO_REPS", "6")
    project.runpytest_subprocess("--gpuperf", *GATE)
    assert path.read_bytes() == before


def test_an_unknown_marker_keyword_fails_that_test_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.gpuperf(treshold=0.2)
        def test_typo(gpu_bench):
            gpu_bench(lambda: None)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_bad.py::test_typo: unknown @pytest.mark.gpuperf keyword(s) treshold*"])


def test_several_named_measurements_and_metrics(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_named="""
        import pytest
        import torch

        def test_two(gpu_bench):
            a = torch.randn(32, 32)
            eager = gpu_bench.measure(torch.mm, args=(a, a), name="eager", flops=2 * 32**3)
            other = gpu_bench.measure(torch.add, args=(a, a), name="add", items=32 * 32)
            gpu_bench.metric("ratio", eager.stats.median_ns / other.stats.median_ns, better="lower",
                             measurement="eager")
            assert [m.name for m in gpu_bench.measurements] == ["eager", "add"]
            assert gpu_bench.measurements[0].metric("ratio") is not None

        def test_duplicate_name(gpu_bench):
            gpu_bench(lambda: None)
            gpu_bench(lambda: None)
        """
    )
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *GATE)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*measurement 'default' measured twice in one test*"])
    (path,) = (pytester.path / "baselines").rglob("*.json")
    entries = json.loads(path.read_text())["entries"]
    assert sorted(k.rsplit("::", 1)[1] for k in entries) == ["add", "eager"]


def test_function_error_fails_test_with_original_error_and_writes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_raise="""
        def boom():
            raise RuntimeError("kernel exploded")

        def test_raises(gpu_bench):
            gpu_bench(boom)

        def test_after(gpu_bench):
            gpu_bench(lambda: None)
        """
    )
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *GATE)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: kernel exploded*"])
    (path,) = (pytester.path / "baselines").rglob("*.json")
    keys = list(json.loads(path.read_text())["entries"])
    assert keys == ["test_raise.py::test_after::default"]


def test_summary_table_lists_measurements(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--gpuperf", *GATE)
    result.assert_outcomes(passed=2)
    # 80 columns (a log, not a terminal): the test id has a line of its own, its measurements under it
    result.stdout.fnmatch_lines(["test_perf.py::test_matmul", "  default * new"], consecutive=True)


def test_device_option_rejects_cuda_without_gpu(project: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    result = project.runpytest_subprocess("--gpuperf", "--gpuperf-device=cuda", *GATE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-device=cuda: CUDA is not available*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_the_calibrate_setting_is_retired_and_said_so(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("--gpuperf", "--gpuperf-calibrate=on", *GATE)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["gpuperf: --gpuperf-calibrate / gpuperf_calibrate is retired and has no effect*"])


def test_an_entry_records_the_machines_reference_and_an_update_gives_one_to_an_entry_without(
    project: pytest.Pytester,
) -> None:
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *GATE).assert_outcomes(passed=2)
    (path,) = (project.path / "baselines").rglob("*.json")
    document = json.loads(path.read_text())
    (entry,) = document["entries"].values()
    assert set(entry["reference_ns"]) == {"interpreter.1", "vector.1", "memory.1"}
    del entry["reference_ns"]  # as an older plugin wrote it
    path.write_text(json.dumps(document, indent=2))

    loose = [*GATE, "--gpuperf-threshold=3.0"]  # whatever the machine does, the time verdict is unchanged
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *loose).assert_outcomes(passed=2)
    document = json.loads(path.read_text())
    (entry,) = document["entries"].values()
    assert set(entry["reference_ns"]) == {"interpreter.1", "vector.1", "memory.1"}
    # Once it has one, an unchanged entry keeps its bytes. A tiny reference keeps the host's slow phases out
    # of it (only a baseline's reference slower than now makes a pass not one), as does a quiet write.
    entry["reference_ns"] = {kind: 1.0 for kind in entry["reference_ns"]}
    entry.pop("written_busy", None)
    path.write_text(json.dumps(document, indent=2))
    project.runpytest_subprocess("--gpuperf", "--gpuperf-update-baseline", *loose).assert_outcomes(passed=2)
    assert json.loads(path.read_text())["entries"] == document["entries"]
