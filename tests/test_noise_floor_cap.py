"""Recorded noise raises the threshold only up to a cap (NoiseFloor), and the note says so."""

from __future__ import annotations

import pytest
from verdict_helpers import compare, entry, measurement, time_of

from pytest_gpuperf.model import Verdict
from pytest_gpuperf.verdict.rules import NOISE_FLOOR_CAP


def test_a_baseline_noise_of_095_does_not_raise_the_threshold_to_285_percent() -> None:
    c = time_of(compare(measurement(1500.0), entry(1000.0, noise=0.95)))  # a planted +50%
    assert c.threshold == pytest.approx(NOISE_FLOOR_CAP * 0.10)
    assert c.verdict is Verdict.REGRESSION
    assert "threshold raised from 10.0% to 25.0%, capped at 2.5x: the recorded noise (baseline 95.0%" in c.note
    assert "would raise it to 285.0%" in c.note


def test_below_the_cap_the_floor_is_the_noise() -> None:
    c = time_of(compare(measurement(1150.0), entry(1000.0, noise=0.05)))
    assert c.threshold is not None and 0.10 < c.threshold < NOISE_FLOOR_CAP * 0.10
    assert "capped" not in c.note
