"""Planted regressions for the profile diff's end-to-end tests: each names the operator (or function) responsible.

``PLANT`` (an environment variable of the test run) lists the regressions in effect:
``extra`` (an extra operation in a model's forward), ``amp`` (autocast off: the
matmul runs in float32 instead of bfloat16), ``break`` (graph breaks split a
compiled function), ``custom`` (a custom op does more work); in the pure-Python suite,
``slow`` (one function does more work in its own code).
"""

from __future__ import annotations

MODELS = """
import os

import numpy as np
import torch

PLANT = os.environ.get("PLANT", "")
X = torch.randn(64, 256)
LIN = torch.nn.Linear(256, 256)


def forward(x):
    y = torch.relu(LIN(x))
    if "extra" in PLANT:
        y = torch.nn.functional.softmax(y @ y.T, dim=-1) @ y
    return y


def test_forward(gpu_bench):
    with torch.no_grad():
        gpu_bench(forward, X)


W = torch.randn(512, 512)


def amp_step(x):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled="amp" not in PLANT):
        return (x @ W).relu()


def test_amp(gpu_bench):
    gpu_bench(amp_step, torch.randn(256, 512))


def split():
    if "break" in PLANT:
        torch._dynamo.graph_break()


def small(x):
    x = torch.sin(x) + 1
    split()
    x = torch.cos(x) + 2
    split()
    x = torch.sin(x) * 3
    split()
    x = torch.cos(x) - 1
    split()
    return torch.tanh(x)


compiled = torch.compile(small, backend="eager")


def test_compiled(gpu_bench):
    gpu_bench(compiled, torch.randn(8))


@torch.library.custom_op("demo::blur", mutates_args=())
def blur(x: torch.Tensor) -> torch.Tensor:
    a = x.numpy()
    for _ in range(12 if "custom" in PLANT else 3):
        a = (a + np.roll(a, 1)) * 0.5
    return torch.from_numpy(a)


def test_custom(gpu_bench):
    gpu_bench(blur, torch.randn(20000))


def test_steady(gpu_bench):
    gpu_bench(torch.mm, W, W)
"""

# Writes each result's differential profile to diffs.json at the end of the session
# (the reports render it; this reads the engines' result directly).
# A session's differential profiles in diffs.json, without torch (a suite that does not use it)
DUMP_HOOK = """
import json


def pytest_sessionfinish(session):
    from pytest_gpuperf.plugin.session import STATE_KEY

    state = session.config.stash.get(STATE_KEY, None)
    if state is None:
        return
    out = {}
    for r in state.results:
        d = r.profile_diff
        out[r.measurement.key.split("::")[1]] = {
            "notes": [n.text for n in r.measurement.notes],
            "metrics": [m.name for m in r.measurement.metrics],
            "diff": None if d is None else {
                "rows": [[c.name, c.status, c.calls_changed] for c in d.changes],
                "why": [[r.name, r.reading, r.role] for r in d.rows], "finding": d.finding,
                "measured": None if d.measured is None else d.measured.delta_ns,
                "label": d.base_label, "note": d.note, "has_base": d.base is not None,
                "head_trace": d.head_trace, "base_trace": d.base_trace,
            },
        }
    with open("diffs.json", "w") as f:
        json.dump(out, f)
"""


def autocast_is_faster() -> bool:
    """Whether turning bfloat16 autocast off is a large slowdown of ``amp_step`` on this CPU.

    A CPU flag (avx512_bf16, amx_bf16) is not enough: on some hosts that report native
    bfloat16, torch's bf16 matmul of this size runs slower than float32, and the plant then
    reads as an improvement. So the two paths are timed here, once, and the plant is used
    only where autocast is at least 1.5x faster (where it helps at all it is several times
    faster, so the margin keeps the choice stable on a noisy host).
    """
    import time

    import torch

    x, w = torch.randn(256, 512), torch.randn(512, 512)

    def fastest(enabled: bool) -> float:
        best = float("inf")
        for _ in range(30):
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
                (x @ w).relu()
            best = min(best, time.perf_counter() - start)
        return best

    fastest(True), fastest(False)  # warm-up: the first calls pick kernels
    return fastest(False) > 1.5 * fastest(True)


DUMP_CONFTEST = (
    """
import torch

torch.set_num_threads(1)
"""
    + DUMP_HOOK
)

# A pure-Python suite (no torch, no numpy): ``PLANT=slow`` makes ``normalize`` do more work in its own code.
PYTHON_SUITE = """
import os

SLOW = "slow" in os.environ.get("PLANT", "")
TEXT = "The quick brown fox, jumps over the lazy dog. " * 150


def tokenize(text):
    return text.split()


def normalize(words):
    out = []
    for w in words:
        out.append(w.lower().strip(".,"))
    if SLOW:
        total = 0
        for i in range(len(words) * 40):
            total += i * i
    return out


def count(words):
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return counts


def pipeline():
    return count(normalize(tokenize(TEXT)))


def test_pipeline(gpu_bench):
    gpu_bench(pipeline)
"""
