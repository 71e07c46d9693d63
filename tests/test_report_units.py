from __future__ import annotations

import pytest

from pytest_gpuperf.report.units import (
    format_bytes,
    format_change,
    format_precision,
    format_time,
    format_value,
)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0.0, "0.000 ns"),
        (12.345, "12.35 ns"),
        (999.0, "999.0 ns"),
        (1_500.0, "1.500 us"),
        (999_960.0, "1.000 ms"),  # rounds up into the next unit, never "1000.0 us"
        (45_600_000.0, "45.60 ms"),
        (2.5e9, "2.500 s"),
        (7_200e9, "7200 s"),
    ],
)
def test_format_time_picks_unit_by_magnitude(ns: float, text: str) -> None:
    assert format_time(ns) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.000 KiB"),
        (3 * 2**20, "3.000 MiB"),
        (int(1.5 * 2**30), "1.500 GiB"),
    ],
)
def test_format_bytes_uses_binary_prefixes(n: int, text: str) -> None:
    assert format_bytes(n) == text


def test_format_value_by_unit() -> None:
    assert format_value(2_000.0, "ns") == "2.000 us"
    assert format_value(2048, "B") == "2.000 KiB"
    assert format_value(2048, "bytes") == "2.000 KiB"
    assert format_value(1.25, "x") == "1.25 x"
    assert format_value(3.0, "") == "3"
    assert format_value(None, "ns") == "-"
    assert format_value(0.0123, "J") == "12.30 mJ"  # the energy per call, in joules
    assert format_value(1.5, "J") == "1.500 J"
    assert format_value(2e-7, "J") == "200.0 nJ"
    assert format_value(0.0, "J") == "0.000 nJ"  # below the smallest prefix: in the smallest


def test_change_and_precision() -> None:
    assert format_change(0.123) == "+12.3%"
    assert format_change(-0.05) == "-5.0%"
    assert format_change(None) == "-"
    assert format_change(float("nan")) == "-"
    assert format_precision(0.012) == "±1.2%"
    assert format_precision(None) == "-"
