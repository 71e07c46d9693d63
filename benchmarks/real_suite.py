"""A public pytest-benchmark suite, unchanged, gated by pytest-gpuperf.

The suite is kornia's color-conversion benchmarks (``benchmarks/color/`` in
https://github.com/kornia/kornia, tests written for pytest-benchmark's
``benchmark`` fixture, parametrized by device, dtype and shape). The script
copies a kornia checkout, installs it with pytest-benchmark and this
pytest-gpuperf into a fresh virtual environment, and runs, printing figures:

1. plain pytest-benchmark (what the suite's owners run today), for reference;
2. ``--gpuperf --gpuperf-update-baseline``: baselines written;
3. ``--gpuperf``, nothing changed: every test must pass;
4. ``--gpuperf`` after a real slowdown planted in kornia's own code
   (``rgb_to_yuv`` computing in float64): the ``rgb_to_yuv`` tests must fail,
   and nothing else; its Markdown (the PR comment) and HTML reports are kept;
5. the plant committed, ``--gpuperf-compare-ref=HEAD~1``: the same tests
   fail against the commit before it, measured in the same run.

    python benchmarks/real_suite.py --kornia PATH_TO_KORNIA_CHECKOUT [--device cuda]

It exits non-zero when an expectation is not met. The kornia commit the
docs cite is in ``KORNIA_COMMIT``; another commit works and is reported.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT

KORNIA_COMMIT = "b4f5a78a13891c7ac4c1cd9695941380273e981d"
SELECTION = ["benchmarks/color", "-k", "128-128", "--optimizer=", "--color=no"]  # eager kernels: no compile per test
PLANTED_IN = "rgb_to_yuv"
ORIGINAL = "    return _apply_linear_transformation(image, kernel)\n"
PLANTED = "    return _apply_linear_transformation(image.double(), kernel.double()).to(image.dtype)\n"


def run(cmd: list[str], cwd: Path, log: Path) -> tuple[int, float]:
    started = time.perf_counter()
    with log.open("w") as out:
        rc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    return rc, time.perf_counter() - started


def install(venv: Path, kornia: Path, torch_spec: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, torch_spec], check=True)
    subprocess.run([*pip, "kornia_rs>=0.1.9", "numpy", "packaging", "pytest", "pytest-benchmark"], check=True)
    subprocess.run([*pip, "--no-deps", "-e", str(kornia)], check=True)
    subprocess.run([*pip, "-e", str(ROOT)], check=True)
    return venv / "bin" / "python"


def plant(kornia: Path) -> None:
    """Make ``rgb_to_yuv`` (only it) compute in float64: a plausible accuracy change that costs time."""
    source = kornia / "kornia" / "color" / "yuv.py"
    text = source.read_text()
    start = text.index(f"def {PLANTED_IN}(")
    at = text.index(ORIGINAL, start)
    source.write_text(text[:at] + PLANTED + text[at + len(ORIGINAL) :])


def verdicts(results: Path) -> dict[str, str]:
    data = json.loads(results.read_text())
    return {r["key"]: r["verdict"] for r in data["results"]}


def outcomes(log: Path) -> tuple[list[str], str]:
    """The failed test ids and pytest's final summary line."""
    lines = log.read_text().splitlines()
    failed = [ln.split(" ", 2)[1] for ln in lines if ln.startswith("FAILED ")]
    summary = next((ln for ln in reversed(lines) if " in " in ln and ("passed" in ln or "failed" in ln)), "")
    return failed, summary.strip("= ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kornia", type=Path, required=True, help="a kornia git checkout (not modified)")
    parser.add_argument("--device", default="cpu", help="kornia's --device option: cpu or cuda")
    parser.add_argument("--torch", default="torch==2.13.0", help="the torch requirement to install")
    parser.add_argument("--work", type=Path, default=None, help="keep the work folder here (default: a temp one)")
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="gpuperf-real-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    kornia = work / "kornia"
    if kornia.exists():
        shutil.rmtree(kornia)
    subprocess.run(["git", "clone", "-q", str(args.kornia), str(kornia)], check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=kornia, capture_output=True, text=True,
                            check=True).stdout.strip()  # fmt: skip
    python = install(work / "venv", kornia, args.torch)
    pytest = [str(python), "-m", "pytest", *SELECTION, f"--device={args.device}", "-p", "no:cacheprovider", "-q"]
    print(f"kornia {commit}{'' if commit == KORNIA_COMMIT else ' (not the commit the docs cite)'}")
    print(f"suite: {' '.join(SELECTION)} --device={args.device}; work folder {work}")

    planted_reports = [f"--gpuperf-markdown={work / 'planted.md'}", f"--gpuperf-html={work / 'planted.html'}"]
    steps = [
        ("pytest-benchmark (plain pytest)", [], False),
        ("write baselines", ["--gpuperf", "--gpuperf-update-baseline"], False),
        ("unchanged rerun", ["--gpuperf", f"--gpuperf-json={work / 'unchanged.json'}"], False),
        ("planted slowdown", ["--gpuperf", f"--gpuperf-json={work / 'planted.json'}", *planted_reports], True),
        ("compare-ref", ["--gpuperf-compare-ref=HEAD~1", f"--gpuperf-json={work / 'compare-ref.json'}"], True),
    ]
    ok = True
    for name, extra, planted in steps:
        if name == "compare-ref":
            git = ["git", "-c", "user.name=real-suite", "-c", "user.email=real-suite@localhost"]
            subprocess.run([*git, "commit", "-qam", "rgb_to_yuv in float64"], cwd=kornia, check=True)
        elif planted:
            plant(kornia)
        log = work / f"{name.split(' (')[0].replace(' ', '-')}.log"
        rc, wall = run([*pytest, *extra], kornia, log)
        failed, summary = outcomes(log)
        print(f"\n{name}: exit {rc}, {wall:.0f} s wall; {summary}  (log: {log})")
        for test in failed:
            print(f"  FAILED {test}")
        if planted:
            expected = all(PLANTED_IN in t for t in failed) and len(failed) > 0
            ok &= rc == 1 and expected
        else:
            ok &= rc == 0
    for name in ("unchanged", "planted", "compare-ref"):
        counts: dict[str, int] = {}
        for verdict in verdicts(work / f"{name}.json").values():
            counts[verdict] = counts.get(verdict, 0) + 1
        print(f"{name} verdicts: {', '.join(f'{v} {n}' for v, n in sorted(counts.items()))}")
    print("\nexpectations met" if ok else "\nEXPECTATIONS NOT MET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
