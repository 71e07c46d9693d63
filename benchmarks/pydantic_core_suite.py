"""pydantic-core's own pytest-benchmark suite, as it is, under ``--gpuperf``.

pydantic-core's settings are hostile to a plugin that speaks at configure time:
``filterwarnings = ['error']``, ``--benchmark-disable`` in its addopts, pytest-benchmark
options pytest-gpuperf does not use (``--benchmark-columns``, ``--benchmark-group-by``), and
benchmarks that time the creation of a generator or an iterator. The script fetches the
sdist (which ships ``tests/benchmarks``) from PyPI, installs the matching pydantic-core
wheel and the suite's test dependencies into a folder of its own (put on ``PYTHONPATH``
beside this checkout), and runs ``pytest tests/benchmarks --gpuperf`` in the sdist's folder.

Printed: the outcome line, INTERNALERRORs (target: none), tests failed (target: none), the
measurements taken (``--benchmark-disable`` from addopts is overridden: every test measured)
and the notes the run gave.

    python benchmarks/pydantic_core_suite.py [--version 2.50.5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

from _common import ROOT

VERSION = "2.50.5"
TEST_DEPENDENCIES = ["dirty-equals", "pytest-timeout", "typing-inspection", "inline-snapshot", "pytest-mock",
                     "python-dateutil", "tzdata"]  # fmt: skip
# Already in this environment; a second copy in the target folder would shadow them.
SHADOWING = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py", "bin")


def sdist_url(version: str) -> str:
    """The sdist's address from PyPI's simple index (pip cannot download it without building it)."""
    with urllib.request.urlopen("https://pypi.org/simple/pydantic-core/") as page:
        html = page.read().decode()
    match = re.search(rf'href="([^"]*/pydantic_core-{re.escape(version)}\.tar\.gz)[^"]*"', html)
    if match is None:
        raise SystemExit(f"no sdist of pydantic-core {version} on PyPI's simple index")
    return match.group(1)


def prepare(work: Path, version: str) -> tuple[Path, Path]:
    archive = work / f"pydantic_core-{version}.tar.gz"
    urllib.request.urlretrieve(sdist_url(version), archive)
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    site = work / "site"
    pip = [sys.executable, "-m", "pip", "-q", "install", "--target", str(site)]
    subprocess.run([*pip, f"pydantic-core=={version}", *TEST_DEPENDENCIES], check=True)
    for path in site.iterdir():
        if path.name.split("-")[0] in SHADOWING or path.name in SHADOWING:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    return work / f"pydantic_core-{version}", site


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=VERSION, help="pydantic-core release")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (sdist, installs, results)")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="gpuperf-pydantic-core-"))
    source, site = prepare(work, args.version)
    results = work / "results.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "CUDA_VISIBLE_DEVICES": ""}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/benchmarks", "--gpuperf", "-p", "no:cacheprovider",
         f"--gpuperf-json={results}"],
        cwd=source, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    output = done.stdout + done.stderr
    summary = next((ln for ln in reversed(done.stdout.splitlines()) if " in " in ln and "=" in ln), "").strip("= ")
    measured = json.loads(results.read_text())["results"] if results.exists() else []
    notes = sorted({n["text"] for r in measured for n in r["measurement"]["notes"]})
    header = [ln for ln in done.stdout.splitlines()[:20] if ln.startswith("gpuperf:")]
    figures = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pydantic_core": args.version, "rc": done.returncode,
        "summary": summary, "wall_s": wall, "internal_errors": output.count("INTERNALERROR"),
        "measurements": len(measured), "header": header, "notes": notes,
    }  # fmt: skip
    print(f"{summary} (exit {done.returncode}, {wall:.0f} s); INTERNALERROR: {figures['internal_errors']}; "
          f"{len(measured)} measurements")  # fmt: skip
    for line in header:
        print(f"  {line}")
    for note in notes:
        print(f"  note: {note}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    met = done.returncode == 0 and not figures["internal_errors"] and measured
    print("targets met" if met else "targets NOT met")
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
