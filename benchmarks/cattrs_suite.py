"""cattrs' own pytest-benchmark suite (sub-microsecond calls), unchanged, gated by pytest-gpuperf.

cattrs ships ``bench/`` (54 tests on pytest-benchmark's ``benchmark`` fixture, most calls
well under a microsecond) in its source distribution. The script downloads that sdist from
PyPI, installs cattrs with the extras its benchmarks import (orjson, msgspec) into a folder
of its own, put on ``PYTHONPATH`` beside this checkout, and runs in the sdist's folder, with
its own pytest settings (addopts included), each a fresh pytest process:

1. plain pytest-benchmark (what cattrs' maintainers run), for reference;
2. ``--gpuperf --gpuperf-update-baseline``: baselines written;
3. ``--gpuperf`` ``--unchanged`` times against them, nothing changed: every failure is false;
4. a slowdown planted in cattrs' own code (the hook ``enums.enum_structure_factory`` makes
   for plain enums does a little more work per call), then ``--gpuperf`` once more; the
   tests that reach the planted hook are found by a separate run with the hook recording
   the test that calls it, so "caught" is measured against the truth, not against a guess.

Printed: each run's wall time and outcome, the write / plain ratio (target: at most 3),
false failures and false improvements per unchanged session (target: none in 3 under load),
and the planted slowdown's caught and missed tests (target: all caught, nothing else).
``--background-load N`` runs N noisy neighbours (background_load.py) through every run.

    python benchmarks/cattrs_suite.py [--background-load 2] [--unchanged 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from _common import ROOT
from background_load import BackgroundLoad

CATTRS = "26.1.0"
PLANT_FILE = "cattrs/enums.py"
ORIGINAL = "    return lambda v, _: type(v)\n"
# about 0.3 us more per structured enum, on calls of about 0.3-0.6 us
PLANTED = "    return lambda v, _: type(v) if sum(range(24)) >= 0 else None\n"
RECORDING = (
    "    import os as _os\n\n"
    "    def _hook(v, _):\n"
    "        with open(_os.environ['CATTRS_REACH_LOG'], 'a') as _log:\n"
    "            _log.write(_os.environ.get('PYTEST_CURRENT_TEST', '').split(' ')[0] + '\\n')\n"
    "        return type(v)\n\n"
    "    return _hook\n"
)


def prepare(work: Path) -> tuple[Path, Path]:
    """The extracted sdist (the suite's folder) and the folder cattrs and its extras are installed in."""
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "download", "--no-deps", "--no-binary", ":all:", f"cattrs=={CATTRS}", "-d", str(work)],
                   check=True)  # fmt: skip
    with tarfile.open(work / f"cattrs-{CATTRS}.tar.gz") as archive:
        archive.extractall(work, filter="data")
    source = work / f"cattrs-{CATTRS}"
    site = work / "site"
    subprocess.run([*pip, "install", "--target", str(site), f"{source}[orjson,msgspec]"], check=True)
    return source, site


def run(args: list[str], cwd: Path, site: Path, extra_env: dict[str, str] | None = None) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "CUDA_VISIBLE_DEVICES": ""}
    env.update(extra_env or {})
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "bench", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, check=False)  # fmt: skip
    wall = time.perf_counter() - started
    summary = next((ln for ln in reversed(done.stdout.splitlines()) if " in " in ln and "=" in ln), "").strip("= ")
    if "INTERNALERROR" in done.stdout + done.stderr:
        summary += " (INTERNALERROR)"
    return {"wall_s": wall, "summary": summary, "rc": done.returncode, "tail": done.stdout[-2000:]}


def verdicts(results: Path) -> dict[str, str]:
    """Each test's verdict from a ``--gpuperf-json`` file."""
    data = json.loads(results.read_text())
    return {r["key"].rsplit("::", 1)[0]: r["verdict"] for r in data["results"]}


def plant(site: Path, text: str) -> None:
    path = site / PLANT_FILE
    source = path.read_text()
    current = next(line for line in (ORIGINAL, PLANTED, RECORDING) if line in source)
    path.write_text(source.replace(current, text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--background-load", type=int, default=2, help="noisy-neighbour processes throughout")
    parser.add_argument("--unchanged", type=int, default=3, help="unchanged gating sessions")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (sdist, installs, results)")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="gpuperf-cattrs-"))
    source, site = prepare(work)
    baselines = work / "baselines"
    gate = ["--gpuperf", f"--gpuperf-baseline-dir={baselines}"]
    machine = {
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    figures: dict[str, object] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine,
        "cattrs": CATTRS,
        "background_load": args.background_load,
    }

    # Which tests reach the planted hook: recorded by the hook itself, in a run that times nothing.
    plant(site, RECORDING)
    reach_log = work / "reach.log"
    run(["--benchmark-disable"], source, site, {"CATTRS_REACH_LOG": str(reach_log)})
    reached = sorted({line for line in reach_log.read_text().splitlines() if line}) if reach_log.exists() else []
    plant(site, ORIGINAL)
    print(f"{len(reached)} tests reach the planted hook", flush=True)

    with BackgroundLoad(args.background_load):
        plain = run([], source, site)
        print(f"plain pytest-benchmark: {plain['wall_s']:.1f} s, {plain['summary']}", flush=True)
        write = run([*gate, "--gpuperf-update-baseline"], source, site)
        print(f"baseline write: {write['wall_s']:.1f} s ({write['wall_s'] / plain['wall_s']:.2f}x plain), "
              f"{write['summary']}", flush=True)  # fmt: skip
        sessions = []
        for i in range(args.unchanged):
            out = work / f"unchanged-{i}.json"
            result = run([*gate, f"--gpuperf-json={out}"], source, site)
            seen = verdicts(out) if out.exists() else {}
            result["regressions"] = sorted(t for t, v in seen.items() if v == "regression")
            result["improvements"] = sorted(t for t, v in seen.items() if v == "improvement")
            result["unstable"] = sorted(t for t, v in seen.items() if v == "unstable")
            sessions.append(result)
            print(f"unchanged {i + 1}: {result['wall_s']:.1f} s, {result['summary']}; false regressions "
                  f"{len(result['regressions'])}, false improvements {len(result['improvements'])}, "
                  f"unstable {len(result['unstable'])}", flush=True)  # fmt: skip
        plant(site, PLANTED)
        out = work / "planted.json"
        planted = run([*gate, f"--gpuperf-json={out}"], source, site)
        plant(site, ORIGINAL)
    seen = verdicts(out) if out.exists() else {}
    failed = {t for t, v in seen.items() if v == "regression"}
    caught, missed = sorted(failed & set(reached)), sorted(set(reached) - failed)
    others = sorted(failed - set(reached))
    print(f"planted: {planted['wall_s']:.1f} s, {planted['summary']}; caught {len(caught)}/{len(reached)}, "
          f"missed {missed or 'none'}, unreached tests failed {others or 'none'}", flush=True)  # fmt: skip
    figures.update({
        "reached": reached, "plain": plain, "write": write, "write_over_plain": write["wall_s"] / plain["wall_s"],
        "unchanged": sessions, "planted": {**planted, "caught": caught, "missed": missed, "unreached_failed": others},
    })  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    met = (
        write["wall_s"] <= 3 * plain["wall_s"]
        and all(not s["regressions"] and not s["improvements"] for s in sessions)
        and reached and not missed and not others
    )  # fmt: skip
    print("targets met" if met else "targets NOT met")
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
