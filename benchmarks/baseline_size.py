"""How large a baseline file is and how many lines a refresh of it changes, in this layout and the earlier one.

A small GPT's project (tests/gpt_block.py, the shape of nanoGPT's model): seven perf tests (forward,
forward and backward, each with fused and manual attention, bf16 autocast, a short sequence, a
matmul), in a temporary git repository. Two real sessions, each a fresh pytest process:

1. ``--gpuperf --gpuperf-update-baseline``: the entries written, with their stored profiles;
2. the same after a commit that makes the model wider, so every entry changes: a refresh.

Printed for both layouts of the same entries: the file's size and lines, and the lines the refresh's
diff changes (removed plus added), in all and per entry. The earlier layout is what pytest-gpuperf
wrote before each field of an entry got one line (``json.dumps(indent=2)`` of the same document).

    python benchmarks/baseline_size.py [--json out.json]
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import shared_test_helper

SUITE = """
import torch
from gpt_block import GptShape, gpt_step

WIDTH = WIDTH_VALUE
SHAPE = GptShape(layers=1, width=WIDTH, heads=2, tokens=64, batch=2, vocab=128)


def test_forward(gpu_bench):
    gpu_bench(gpt_step(True, False, SHAPE))


def test_forward_backward(gpu_bench):
    gpu_bench(gpt_step(True, True, SHAPE))


def test_forward_manual(gpu_bench):
    gpu_bench(gpt_step(False, False, SHAPE))


def test_forward_backward_manual(gpu_bench):
    gpu_bench(gpt_step(False, True, SHAPE))


def test_bf16_autocast(gpu_bench):
    step = gpt_step(True, False, SHAPE)

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return step()

    gpu_bench(run)


def test_short_sequence(gpu_bench):
    gpu_bench(gpt_step(True, False, GptShape(layers=1, width=WIDTH, heads=2, tokens=16, batch=1, vocab=128)))


def test_matmul(gpu_bench):
    a = torch.randn(2 * WIDTH, 2 * WIDTH)
    gpu_bench(lambda: a @ a)
"""


def earlier_layout(text: str) -> str:
    """The same document as pytest-gpuperf wrote it before one line per field: every value on its own line."""
    return json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def changed_lines(before: str, after: str) -> int:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), n=0)
    return sum(1 for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---")))


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", *args], cwd=project,
                   check=True, capture_output=True)  # fmt: skip


def update(project: Path, width: int) -> str:
    """Commit the suite at ``width`` and write its baselines; the file's text."""
    (project / "tests" / "test_gpt.py").write_text(SUITE.replace("WIDTH_VALUE", str(width)))
    git(project, "add", "tests")
    git(project, "commit", "-q", "-m", f"width {width}")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--gpuperf",
                           "--gpuperf-update-baseline"], cwd=project, env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the update session failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    (path,) = (project / "baselines").rglob("*.json")
    return path.read_text()


def figures(before: str, after: str) -> dict[str, int]:
    entries = len(json.loads(after)["entries"])
    return {"bytes": len(after.encode()), "lines": len(after.splitlines()), "entries": entries,
            "refresh_changed_lines": changed_lines(before, after)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    gpt = shared_test_helper("gpt_block")
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "tests").mkdir()
        shutil.copy(str(gpt.__file__), project / "tests" / "gpt_block.py")
        (project / "tests" / "conftest.py").write_text("import torch\ntorch.set_num_threads(1)\n")
        (project / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
        git(project, "init", "-q")
        written = update(project, 64)
        refreshed = update(project, 96)
    layouts = {"earlier (one value a line)": (earlier_layout(written), earlier_layout(refreshed)),
               "this one (one field a line)": (written, refreshed)}  # fmt: skip
    results = {name: figures(*texts) for name, texts in layouts.items()}
    print(f"{'layout':<28} {'entries':>7} {'bytes':>8} {'lines':>6} {'refresh diff lines':>18} {'per entry':>9}")
    for name, f in results.items():
        per_entry = f["refresh_changed_lines"] / f["entries"]
        print(f"{name:<28} {f['entries']:>7} {f['bytes']:>8,} {f['lines']:>6,} {f['refresh_changed_lines']:>18,} "
              f"{per_entry:>9.1f}")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
