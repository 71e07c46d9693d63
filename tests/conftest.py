from __future__ import annotations

import pytest

# Budgets that keep measured runs in tests short; tests assert behaviour, never timings.
FAST = ["--gpuperf-warmup-time=0.02", "--gpuperf-min-time=0.05", "--gpuperf-max-time=0.4"]


@pytest.fixture
def fast_args() -> list[str]:
    return list(FAST)
