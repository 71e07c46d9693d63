"""Small rules of the compare-ref machinery that need no worker process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from pytest_gpuperf.config import MeasureSettings
from pytest_gpuperf.engines.compare_ref.confirm import confirming_settings, describe
from pytest_gpuperf.workers.protocol import HANDOVER_S, handover_pause_s


@pytest.fixture
def restore_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_only_a_process_with_an_openmp_pool_pauses_at_the_handover(restore_threads: None) -> None:
    torch.set_num_threads(1)
    assert handover_pause_s() == 0.0
    torch.set_num_threads(2)
    assert handover_pause_s() == HANDOVER_S


def test_fresh_pairs_get_a_quarter_of_the_budget_but_never_less_than_min_time() -> None:
    assert confirming_settings(MeasureSettings(min_time_s=0.2, max_time_s=2.0)).max_time_s == 0.5
    assert confirming_settings(MeasureSettings(min_time_s=0.2, max_time_s=0.3)).max_time_s == 0.2
    assert describe([1.031, 1.02], 1.05) == "2 fresh process pairs (ratios 1.031, 1.020); first pair 1.050"


def test_fresh_pairs_stop_at_twice_the_measurements_target_precision() -> None:
    assert confirming_settings(MeasureSettings(target_precision=0.01)).target_precision == 0.02
    assert confirming_settings(MeasureSettings(target_precision=0.4)).target_precision == 0.5  # still a fraction


def test_loading_the_plugin_does_not_import_scipy_stats() -> None:
    # scipy.stats costs about 0.5 s of start-up in every process, workers included
    code = (
        "import sys\n"
        "import pytest_gpuperf.plugin, pytest_gpuperf.plugin.fixture, pytest_gpuperf.measure.runner\n"
        "import pytest_gpuperf.engines.compare_ref.engine, pytest_gpuperf.workers.worker_plugin\n"
        "assert 'scipy.stats' not in sys.modules, 'scipy.stats imported at start-up'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_baseline_mode_comparison_does_not_import_scipy() -> None:
    # the gate's statistics are on numpy (stats.py says why): a process that measures and
    # compares against a baseline, the common case of every gating session, pays no scipy
    code = (
        "import sys\n"
        "from pytest_gpuperf import stats\n"
        "from tests.verdict_helpers import compare, entry, measurement\n"
        "import pytest_gpuperf.measure.runner\n"
        "comparisons = compare(measurement(1300.0), entry(1000.0))\n"
        "assert any(c.verdict.value == 'regression' for c in comparisons), comparisons\n"
        "assert stats.relative_precision(list(range(1, 500))) < 1\n"
        "assert stats.paired_median_ratio([1.0 + i / 100 for i in range(20)], [1.0] * 20)[3] < 1e-3\n"
        "assert stats.between_process_noise([1.0, 1.1, 1.3]) > 0\n"
        "assert 'scipy' not in sys.modules, sorted(m for m in sys.modules if m.startswith('scipy'))[:5]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)
