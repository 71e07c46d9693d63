from __future__ import annotations

import pytest

from pytest_gpuperf.config import GpuperfConfig, MarkerOptions, MeasureSettings
from pytest_gpuperf.errors import ConfigError


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
    opts = MarkerOptions.from_kwargs({"threshold": 0.3, "max_time": 5.0, "calibrate": False}, test_id="t")
    merged = opts.apply(session, test_id="t")
    assert merged.threshold == 0.3
    assert merged.measure.max_time_s == 5.0
    assert merged.calibrate == "off"
    assert merged.memory_threshold == session.memory_threshold
    calibrated = MarkerOptions.from_kwargs({"calibrate": True}, test_id="t").apply(GpuperfConfig(), test_id="t")
    assert GpuperfConfig().calibrate == "off" and calibrated.calibrate == "on"


def test_marker_bad_time_budget_is_named() -> None:
    opts = MarkerOptions.from_kwargs({"min_time": 3.0, "max_time": 1.0}, test_id="tests/t.py::t")
    with pytest.raises(ConfigError, match=r"tests/t.py::t: .*min time"):
        opts.apply(GpuperfConfig(), test_id="tests/t.py::t")


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
