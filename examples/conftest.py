"""Shared fixtures of the example perf suite: the device, its sizes, the planted regression.

Run it with::

    pytest examples                      # smoke: every step runs once, nothing is gated
    pytest examples --gpuperf            # measure and gate against baselines/
    GPUPERF_EXAMPLES_PLANT=graph_break pytest examples --gpuperf   # see a regression fail
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
import torch

from pytest_gpuperf.paths import Bench

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    # --import-mode=importlib does not put this folder on sys.path; the test modules and
    # the spawned DDP ranks (which inherit sys.path) import workloads from it.
    sys.path.insert(0, str(HERE))

from workloads import Sizes, active_plants, sizes_for  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``filterwarnings = error`` for the suite's code, not torch's internals; wider time gates on a CPU host.

    inductor imports torch modules that emit their own DeprecationWarnings (e.g.
    ``torch.jit.script_method`` from torch.utils.mkldnn); those are torch's to fix.
    """
    threshold = baseline_threshold(config)
    few_cpus = not torch.cuda.is_available() and (os.cpu_count() or 1) < 4
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.filterwarnings("ignore::DeprecationWarning:torch"))
        if few_cpus and item.name == "test_ddp_two_ranks":
            # Two gloo ranks and their launcher on fewer than four CPUs contend for the cores:
            # an unchanged step reads up to +/-50% between sessions there, so only a larger
            # change is gated (on GPUs, and on CPU hosts with room, the default threshold holds).
            item.add_marker(pytest.mark.gpuperf(threshold=0.75))
        elif threshold is not None:
            item.add_marker(pytest.mark.gpuperf(threshold=threshold))


def baseline_threshold(config: pytest.Config) -> float | None:
    """The suite's time threshold against baselines on this device (``Sizes.baseline_threshold``).

    None where the session sets its own: a threshold given on the command line or in the ini
    file, and compare-ref, whose interleaved rounds do not see the drift between sessions.
    """
    if config.getoption("gpuperf_threshold", None) is not None or config.getini("gpuperf_threshold"):
        return None
    if config.getoption("gpuperf_compare_ref", None):
        return None
    return sizes_for(measuring_device(config)).baseline_threshold


def measuring_device(config: pytest.Config) -> torch.device:
    """The device the plugin will measure on (``--gpuperf-device``; CUDA when available), known at collection."""
    chosen = config.getoption("gpuperf_device", None) or config.getini("gpuperf_device") or "auto"
    if chosen == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(chosen)


def pytest_configure(config: pytest.Config) -> None:
    """Refuse a misspelt GPUPERF_EXAMPLES_PLANT before anything runs; settle CPU threads."""
    try:
        active_plants()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    threads = os.environ.get("GPUPERF_EXAMPLES_CPU_THREADS", "1")
    if not torch.cuda.is_available() and threads != "all":
        # On a shared CPU (CI runner, laptop) torch's OpenMP threads spin against other
        # processes for the cores: the same step ran 3.3 ms on one thread and 13-100 ms
        # on two here. One thread per process makes CPU timings repeatable.
        torch.set_num_threads(int(threads))
    if not os.environ.get("TORCH_TRACE"):
        # torch.compile writes structured DEBUG records to "torch.__trace", meant for TORCH_TRACE
        # files; pytest's log capture picks them up and prints hundreds of empty DEBUG lines
        # under every failing compile test. Without TORCH_TRACE nobody reads them.
        logging.getLogger("torch.__trace").disabled = True


@pytest.fixture
def device(gpu_bench: Bench) -> torch.device:
    """Where the plugin measures (``--gpuperf-device``; CUDA when available)."""
    return gpu_bench.device


@pytest.fixture
def sizes(device: torch.device) -> Sizes:
    """Workload sizes for the device kind: small on CPU, realistic on a GPU."""
    return sizes_for(device)


@pytest.fixture
def cuda_only(device: torch.device) -> None:
    if device.type != "cuda":
        pytest.skip("needs a CUDA device (run with a GPU, or --gpuperf-device=cuda)")


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
