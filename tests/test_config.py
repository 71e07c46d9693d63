from __future__ import annotations

import pytest

from pytest_gpuperf.config import GpuperfConfig, MarkerOptions, MeasureSettings, resolve, with_call_options
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.model import Statistic


def test_marker_unknown_keyword_names_test_and_keyword() -> None:
    with pytest.raises(ConfigError, match=r"tests/test_x.py::test_a: unknown .*treshold"):
        MarkerOptions.from_kwargs({"treshold": 0.2}, test_id="tests/test_x.py::test_a")


def test_marker_rejects_non_numbers_and_bad_metric() -> None:
    with pytest.raises(ConfigError, match=r"threshold=.*must be a number"):
        MarkerOptions.from_kwargs({"threshold": "big"}, test_id="t")
    with pytest.raises(ConfigError, match="metric"):
        MarkerOptions.from_kwargs({"metric": "p42"}, test_id="t")


def test_marker_overrides_apply_on_top_of_session() -> None:
    session = GpuperfConfig(enabled=True, threshold=0.1, calibrate="on")
    opts = MarkerOptions.from_kwargs({"threshold": 0.3, "max_time": 5.0, "calibrate": False, "time_limit": 9},
                                     test_id="t")  # fmt: skip
    merged = resolve(session, opts, test_id="t")
    assert merged.gate.threshold == 0.3
    assert merged.measure.max_time_s == 5.0 and merged.measure.time_limit_s == 9
    assert merged.gate.memory_threshold == session.memory_threshold
    # calibrate is retired: accepted (a suite that set it still collects) and changes nothing
    retired = resolve(GpuperfConfig(enabled=True), MarkerOptions.from_kwargs({"calibrate": True}, test_id="t"))
    assert retired == resolve(GpuperfConfig(enabled=True))


def test_energy_is_asked_by_the_session_a_marker_or_one_call() -> None:
    session = GpuperfConfig(enabled=True, measure=MeasureSettings(energy=True))
    assert resolve(session).measure.energy is True
    off = MarkerOptions.from_kwargs({"energy": False}, test_id="t")
    assert resolve(session, off).measure.energy is False
    on = resolve(GpuperfConfig(enabled=True), MarkerOptions.from_kwargs({"energy": True}, test_id="t"))
    assert on.measure.energy is True
    assert with_call_options(resolve(session), l2_flush=None, cuda_graph=None, energy=False).measure.energy is False
    with pytest.raises(ConfigError, match=r"gpuperf\(energy=\.\.\.\) must be True or False"):
        MarkerOptions.from_kwargs({"energy": "yes"}, test_id="t")


def test_the_mode_decides_the_defaults_in_one_place() -> None:
    baseline = resolve(GpuperfConfig(enabled=True))
    assert baseline.gate.threshold == 0.10
    ref = resolve(GpuperfConfig(enabled=True, compare_ref="main"))
    assert ref.gate.threshold == 0.02 and not ref.plan.takes_reference and baseline.plan.takes_reference
    update = resolve(GpuperfConfig(enabled=True, update_baseline=True))
    assert update.plan.mode == "update" and update.gate.remeasures == 0
    assert resolve(GpuperfConfig(enabled=True, metric="mean")).gate.statistic is Statistic.MEAN


def test_the_old_marker_spelling_of_remeasure_is_accepted() -> None:
    opts = MarkerOptions.from_kwargs({"remeasures": 2}, test_id="t")
    assert resolve(GpuperfConfig(enabled=True), opts).gate.remeasures == 2


def test_marker_bad_time_budget_is_named() -> None:
    opts = MarkerOptions.from_kwargs({"min_time": 3.0, "max_time": 1.0}, test_id="tests/t.py::t")
    with pytest.raises(ConfigError, match=r"tests/t.py::t: .*min time"):
        resolve(GpuperfConfig(enabled=True), opts, test_id="tests/t.py::t")


@pytest.mark.parametrize(
    "kwargs",
    [{"warmup_time_s": -1}, {"min_time_s": 2, "max_time_s": 1}, {"target_precision": 0}, {"max_time_s": 0}],
)
def test_measure_settings_validate(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        MeasureSettings(**kwargs)  # type: ignore[arg-type]


def test_session_config_validates_and_names_option() -> None:
    with pytest.raises(ConfigError, match="--gpuperf-metric"):
        GpuperfConfig(metric="p75")
    with pytest.raises(ConfigError, match="cannot be combined"):
        GpuperfConfig(enabled=True, update_baseline=True, compare_ref="main")
    assert GpuperfConfig().mode == "smoke"
    assert GpuperfConfig(enabled=True).mode == "baseline"
    assert GpuperfConfig(enabled=True, update_baseline=True).mode == "update"


def test_confirm_pairs_is_off_or_enough_for_a_spread() -> None:
    assert GpuperfConfig(confirm_pairs=0).confirm_pairs == 0
    assert GpuperfConfig(confirm_pairs=3).confirm_pairs == 3
    for bad in (-1, 1, 2):
        with pytest.raises(ConfigError, match=r"--gpuperf-confirm-pairs must be 0 .*or at least 3"):
            GpuperfConfig(confirm_pairs=bad)


def test_a_device_spelled_wrong_is_named_at_configuration() -> None:
    with pytest.raises(ConfigError, match=r"--gpuperf-device: unknown device 'gpu'"):
        GpuperfConfig(device="gpu")
    assert GpuperfConfig(device="cuda:1").device == "cuda:1"


def test_a_marker_value_out_of_range_names_the_keyword() -> None:
    with pytest.raises(ConfigError, match=r"t.py::t: @pytest.mark.gpuperf\(threshold=...\) must be a number in \[0"):
        MarkerOptions.from_kwargs({"threshold": -1}, test_id="t.py::t")


def test_a_bad_or_unusable_device_is_a_usage_error(pytester: pytest.Pytester) -> None:
    import torch

    pytester.makepyfile(test_d="def test_d(gpu_bench):\n    gpu_bench(lambda: None)\n")
    bad = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-device=gpu", "-p", "no:cacheprovider")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--gpuperf-device: unknown device 'gpu'*"])
    if not torch.cuda.is_available():
        absent = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-device=cuda", "-p", "no:cacheprovider")
        assert absent.ret == pytest.ExitCode.USAGE_ERROR
        absent.stderr.fnmatch_lines(["*--gpuperf-device=cuda: CUDA is not available*"])


def test_an_ini_value_out_of_range_names_the_ini_key(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngpuperf_threshold = 50\n")
    pytester.makepyfile(test_d="def test_d():\n    pass\n")
    result = pytester.runpytest_subprocess("--gpuperf", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gpuperf_threshold (ini) must be a fraction like 0.1, got 50.0*"])
    on_the_command_line = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-threshold=50", "-p", "no:cacheprovider")
    on_the_command_line.stderr.fnmatch_lines(["*--gpuperf-threshold must be a fraction like 0.1, got 50.0*"])


def test_the_old_marker_spelling_warns_that_it_is_deprecated(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_old="import pytest\n\n@pytest.mark.gpuperf(remeasures=2)\ndef test_old(gpu_bench):\n"
        "    gpu_bench(lambda: None)\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*remeasures=...) is now remeasure=...*"])


def test_an_auto_threshold_has_two_bounds_in_order_and_a_tests_own_threshold_beats_it() -> None:
    from pytest_gpuperf.config import AutoThreshold

    bounds = AutoThreshold.parse("0.01, 0.1")
    assert (bounds.low, bounds.high, str(bounds)) == (0.01, 0.1, "0.01,0.1")
    for bad in ("0.1", "0.1,0.01", "0,0.1", "a,b", "0.01,0.1,0.2"):
        with pytest.raises(ValueError, match="--gpuperf-auto-threshold"):
            AutoThreshold.parse(bad)
    config = GpuperfConfig(enabled=True, auto_threshold=bounds)
    assert resolve(config).gate.auto_threshold == bounds
    assert resolve(config, MarkerOptions(threshold=0.3)).gate.auto_threshold is None


def test_the_auto_threshold_is_an_option_with_an_ini_twin_said_in_the_header(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngpuperf_auto_threshold = 0.01,0.2\n")
    pytester.makepyfile(test_d="def test_d():\n    pass\n")
    result = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-device=cpu", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["gpuperf: time thresholds auto: *within 1.0% to 20.0%*"])
    bad = pytester.runpytest_subprocess("--gpuperf", "--gpuperf-auto-threshold=0.2,0.01", "-p", "no:cacheprovider")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--gpuperf-auto-threshold*"])
