"""The main job: the whole pytest-gpuperf loop, end to end, on this machine.

1. A new user's project (scripts/demo_project) in a temporary git repository:
   smoke run, baseline written, two unchanged reruns pass, 50% more work is caught,
   and ``gpuperf stability`` reads the unchanged reruns' spread.
2. The examples suite (AMP, torch.compile, DDP, kernels, ...) gated against the
   project's committed baselines/, writing JSON, Markdown, pytest-benchmark and
   HTML reports to .gpuperf-out/.
3. A planted graph break in the torch.compile example fails the run, naming the path.

Exits 0 when every step behaved as expected.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / ".gpuperf-out"


def banner(text: str) -> None:
    print(f"\n{'=' * 78}\n== {text}\n{'=' * 78}", flush=True)


def run(args: list[str], cwd: Path, expect: int, env: dict[str, str] | None = None) -> bool:
    print(f"$ {' '.join(args)}" + (f"   [{' '.join(f'{k}={v}' for k, v in (env or {}).items())}]" if env else ""),
          flush=True)
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env={**os.environ, **(env or {})}, check=False)
    ok = proc.returncode == expect
    verdict = "as expected" if ok else f"UNEXPECTED (wanted exit {expect})"
    print(f"-> exit {proc.returncode} in {time.perf_counter() - started:.0f}s: {verdict}", flush=True)
    return ok


def new_user_loop() -> bool:
    banner("1. A new user's project: smoke -> baseline -> unchanged x2 -> injected slowdown -> stability")
    with tempfile.TemporaryDirectory(prefix="gpuperf-demo-") as tmp:
        project = Path(tmp)
        for name in ("test_quickstart.py", "conftest.py"):
            shutil.copy(ROOT / "scripts" / "demo_project" / name, project)
        (project / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
        subprocess.run(["git", "add", "."], cwd=project, check=True)
        subprocess.run(["git", "-c", "user.name=demo", "-c", "user.email=demo@example.invalid", "commit", "-qm",
                        "perf tests"], cwd=project, check=True)
        pytest = [sys.executable, "-m", "pytest", "-q"]
        steps = [
            run(pytest, project, 0),
            run([*pytest, "--gpuperf", "--gpuperf-update-baseline"], project, 0),
            run([*pytest, "--gpuperf", "--gpuperf-json=unchanged-1.json"], project, 0),
            run([*pytest, "--gpuperf", "--gpuperf-json=unchanged-2.json"], project, 0),
            run([*pytest, "--gpuperf"], project, 1, env={"DEMO_EXTRA_WORK": "0.5"}),
            # how steady is this machine for baseline mode? (a real check wants more runs, hours apart)
            run([sys.executable, "-m", "pytest_gpuperf", "stability", "unchanged-1.json", "unchanged-2.json"],
                project, 0),
        ]
        baseline = next((project / "baselines").rglob("*.json"))
        print(f"\nbaseline file written: {baseline.relative_to(project)} ({baseline.stat().st_size} bytes)")
    return all(steps)


def examples_suite() -> bool:
    banner("2. The examples suite gated against the committed baselines/")
    OUT.mkdir(exist_ok=True)
    args = [
        sys.executable, "-m", "pytest", "examples", "-q", "-p", "no:cacheprovider", "--gpuperf",
        f"--gpuperf-json={OUT / 'results.json'}", f"--gpuperf-markdown={OUT / 'comment.md'}",
        f"--gpuperf-benchmark-json={OUT / 'pytest-benchmark.json'}", f"--gpuperf-html={OUT / 'report.html'}",
    ]
    return run(args, ROOT, 0)


def planted_graph_break() -> bool:
    banner("3. A planted graph break in the torch.compile path fails the run")
    args = [sys.executable, "-m", "pytest", "examples", "-q", "-p", "no:cacheprovider", "--gpuperf", "-k", "compile"]
    return run(args, ROOT, 1, env={"GPUPERF_EXAMPLES_PLANT": "graph_break"})


def main() -> int:
    results = {"new user loop": new_user_loop(), "examples suite": examples_suite(),
               "planted graph break": planted_graph_break()}
    banner("Demo summary")
    for step, ok in results.items():
        print(f"  {step:<22} {'ok' if ok else 'FAILED'}")
    print(f"\nreports: {OUT}")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
