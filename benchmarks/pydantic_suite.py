"""pydantic 2.12.5's own benchmark suite as its maintainers run it, under pytest-gpuperf's baseline mode.

pydantic ships ``tests/benchmarks`` in its source distribution: 48 tests on pytest-benchmark's
``benchmark`` fixture run (model validation and serialization of microseconds, schema generation
of 0.1 ms to 1 s, imports, a FastAPI-style startup) and 108 parametrized cases its own marks skip.
The script runs them unchanged: a copy of the sdist's ``tests/`` with its ``pyproject.toml``, so
its own settings stay (``filterwarnings = error``, ``xfail_strict``, ``--benchmark-disable`` and
pytest-benchmark's display options in addopts), against the pydantic wheel (with its pydantic-core
wheel) from PyPI, in a virtual environment with the tests' requirements, pytest-benchmark and this
checkout, and no torch (the script checks). Each session is a fresh pytest process:

1. pytest-benchmark alone (``-p no:gpuperf --benchmark-enable``, as ``make benchmark`` runs it);
2. ``--gpuperf --gpuperf-update-baseline``: baselines written;
3. ``--gpuperf`` ``--unchanged N`` times, nothing changed: every regression is a false alarm;
4. with ``--plant``, a slowdown planted in schema generation: every call of
   ``GenerateSchema.generate_schema`` (each model, field and type whose core schema is built)
   first does ``--plant-work`` iterations of a loop. The plant lives in a copy of the installed
   ``pydantic`` package put first on ``PYTHONPATH`` for the planted sessions only, so the
   unchanged sessions never see it, even after a crash. Which tests reach it in their timed
   function is recorded by a run whose plant logs the test that calls it; how much it slows each of them is measured by
   pytest-benchmark alone with the plant (a fourth plain session); then ``--gpuperf`` gates once.

Printed per session: exit code, the verdict counts of its ``--gpuperf-json`` (regressions,
unstable, not gated, unchanged, and the rest), its wall time and the ratio to pytest-benchmark's;
after the write, how many baseline entries were written while the runner was busy;
for the plant, its size per reached test and the caught, missed and unreached-but-failed tests.
``--background-load N`` runs N intermittent noisy neighbours and ``--hogs N`` N processes that
spin a core throughout (background_load.py), through every session.

    python benchmarks/pydantic_suite.py --cache ~/.cache/gpuperf-pydantic --unchanged 2 --plant [--json out.json]

The sdist is downloaded (``pip download --no-binary :all:``) and the environment made under
``--cache`` once, then reused; the environment is re-pointed at this checkout when another one
is installed there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from _common import ROOT, written_busy
from background_load import BackgroundLoad, describe

PYDANTIC = "2.12.5"
# what tests/conftest.py and tests/benchmarks need beyond pydantic: EmailStr needs email-validator, and
# conftest.py marks tests thread_unsafe, a marker pytest-run-parallel registers (strict settings refuse it unknown)
TEST_REQUIREMENTS = ("pytest", "pytest-benchmark", "pytest-run-parallel>=0.3.1", "email-validator", "faker",
                     "jsonschema")  # fmt: skip
SUITE = "tests/benchmarks"
PLANTED_MODULE = Path("_internal") / "_generate_schema.py"  # inside the pydantic package
# loop iterations per generate_schema call, about 11 ns each on a 2-vCPU cloud VM; a timed call of pydantic's
# schema-generation tests makes one such call per 22-100 us of its own. 5000 (about 55 us) made the 20
# reached tests +27% to +422% slower (median +87%) by pytest-benchmark's medians (the lesser of two
# sessions each) on a 2-vCPU cloud VM
PLANT_WORK = 5000
REACH_LOG = "PYDANTIC_SUITE_REACH_LOG"  # the recording plant's log file, named in its environment
# the verdicts every session line shows, in this order, even when none of them occurred
SHOWN = ("regression", "unstable", "not gated", "unchanged")


def planted_tail(work: int) -> str:
    """Appended to ``_generate_schema.py``: ``generate_schema`` does ``work`` loop iterations more per call."""
    return (
        "\n\n# planted by pytest-gpuperf's benchmarks/pydantic_suite.py\n"
        "_unplanted_generate_schema = GenerateSchema.generate_schema\n\n\n"
        "def _planted_generate_schema(self, obj):\n"
        f"    for _ in range({work}):\n"
        "        pass\n"
        "    return _unplanted_generate_schema(self, obj)\n\n\n"
        "GenerateSchema.generate_schema = _planted_generate_schema\n"
    )


def recording_tail() -> str:
    """Appended instead by the reach run (pytest-benchmark alone, ``--benchmark-disable``: each timed
    function called once, from pytest-benchmark's fixture): a call of ``generate_schema`` from inside
    the timed function logs its test. A model a test defines before it calls ``benchmark`` is not timed,
    so it does not count."""
    return (
        "\n\n# recording plant of pytest-gpuperf's benchmarks/pydantic_suite.py\n"
        "_unplanted_generate_schema = GenerateSchema.generate_schema\n\n\n"
        "def _recording_generate_schema(self, obj):\n"
        "    import os as _os\n"
        "    import sys as _sys\n\n"
        "    _frame = _sys._getframe(1)\n"
        "    while _frame is not None and 'pytest_benchmark' not in _frame.f_code.co_filename:\n"
        "        _frame = _frame.f_back\n"
        "    if _frame is not None:\n"
        "        with open(_os.environ['" + REACH_LOG + "'], 'a') as _log:\n"
        "            _log.write(_os.environ.get('PYTEST_CURRENT_TEST', '') + '\\n')\n"
        "    return _unplanted_generate_schema(self, obj)\n\n\n"
        "GenerateSchema.generate_schema = _recording_generate_schema\n"
    )


def reached_tests(log: str) -> list[str]:
    """The tests whose timed function reached the plant, from the recording plant's log (in the call
    phase: a module-scoped fixture's models, built in a setup phase, are not timed)."""
    tests = {line.rsplit(" ", 1)[0] for line in log.splitlines() if line.endswith(" (call)")}
    return sorted(tests)


def planted_copy(package: Path, folder: Path, tail: str) -> Path:
    """A copy of the ``pydantic`` package folder under ``folder`` with ``tail`` appended to the planted
    module: the folder to put first on ``PYTHONPATH``."""
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(package, folder / "pydantic", ignore=shutil.ignore_patterns("__pycache__"))
    module = folder / "pydantic" / PLANTED_MODULE
    module.write_text(module.read_text() + tail)
    return folder


def sdist(cache: Path) -> Path:
    """pydantic's unpacked source distribution in ``cache``, downloaded from PyPI the first time."""
    source = cache / f"pydantic-{PYDANTIC}"
    if not source.is_dir():
        pip = [sys.executable, "-m", "pip", "-q", "download", "--no-deps", "--no-binary", ":all:"]
        subprocess.run([*pip, f"pydantic=={PYDANTIC}", "-d", str(cache)], check=True)
        with tarfile.open(cache / f"pydantic-{PYDANTIC}.tar.gz") as archive:
            archive.extractall(cache, filter="data")
    return source


def _probe(python: Path, code: str) -> str:
    """What ``code`` prints in the environment of ``python``, run from its own folder: from a checkout's root
    the checkout itself would come first on the import path and hide which one is installed."""
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                          cwd=python.parent).stdout.strip()  # fmt: skip


def environment(venv: Path) -> Path:
    """A virtual environment with the pydantic wheel, the tests' requirements and this checkout (no torch
    extra); a checkout other than this one installed there is replaced."""
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q"]
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    requirements = [f"pydantic[email]=={PYDANTIC}", *TEST_REQUIREMENTS]
    stamp = venv / "pydantic-suite-requirements.txt"  # what was installed, so that a changed list is installed
    if not stamp.exists() or stamp.read_text() != "\n".join(requirements):
        subprocess.run([*pip, *requirements], check=True)
        stamp.write_text("\n".join(requirements))
    installed = _probe(python, "import importlib.util as u; s = u.find_spec('pytest_gpuperf'); print(s and s.origin)")
    if installed != str(ROOT / "pytest_gpuperf" / "__init__.py"):
        subprocess.run([*pip, "-e", str(ROOT)], check=True)
    return python


def pydantic_package(python: Path) -> Path:
    return Path(_probe(python, "import pydantic; print(pydantic.__file__)")).parent


def has_torch(python: Path) -> bool:
    return _probe(python, "import importlib.util as u; print(u.find_spec('torch') is not None)") == "True"


def suite_copy(source: Path, folder: Path) -> None:
    """The sdist's tests and its pyproject.toml (the pytest settings), without its pydantic/: the wheel is tested."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shutil.copytree(source / "tests", folder / "tests")
    shutil.copy2(source / "pyproject.toml", folder / "pyproject.toml")


@dataclass
class Session:
    """One pytest process: what it ran, how it ended, how long it took, what it judged."""

    name: str
    args: list[str]
    rc: int = 0
    wall_s: float = 0.0
    summary: str = ""
    verdicts: dict[str, str] = field(default_factory=dict)  # test -> verdict, from --gpuperf-json

    def counts(self) -> dict[str, int]:
        counted = Counter(self.verdicts.values())
        return {**{v: counted.get(v, 0) for v in SHOWN}, **dict(sorted(counted.items()))}


def verdicts(results: Path) -> dict[str, str]:
    """Each test's verdict from a ``--gpuperf-json`` file (the test's id, as pytest names it)."""
    return {r["measurement"]["test_id"]: r["verdict"] for r in json.loads(results.read_text())["results"]}


def benchmark_minimums(report: Path) -> dict[str, float]:
    """Each test's quickest call in seconds from a ``--benchmark-json`` file of pytest-benchmark: the
    statistic pydantic's settings show first, and the one a busy runner disturbs least."""
    return {b["fullname"]: b["stats"]["min"] for b in json.loads(report.read_text())["benchmarks"]}


def plant_ratios(plain: dict[str, float], planted: dict[str, float]) -> dict[str, float]:
    """Planted over plain time for every test both sessions measured."""
    return {test: planted[test] / plain[test] for test in sorted(plain.keys() & planted.keys()) if plain[test] > 0}


def session_line(session: Session, plain_wall_s: float) -> str:
    counts = ", ".join(f"{v} {n}" for v, n in session.counts().items())
    ratio = f"{session.wall_s / plain_wall_s:.2f}x" if plain_wall_s > 0 else "-"
    judged = f"; {counts}" if session.verdicts else ""
    return f"{session.name:<22} exit {session.rc}  {session.wall_s:7.1f} s  {ratio:>6} pytest-benchmark's{judged}"


def plant_outcome(reached: list[str], session: Session) -> dict[str, list[str]]:
    """The planted gate's regressions against the tests the plant reaches."""
    failed = {t for t, v in session.verdicts.items() if v == "regression"}
    return {
        "caught": sorted(failed & set(reached)),
        "missed": sorted(set(reached) - failed),
        "unreached_failed": sorted(failed - set(reached)),
    }


def spread_line(ratios: dict[str, float], reached: list[str]) -> str:
    """How much slower the plant made the tests it reaches, and the others, by pytest-benchmark's minimums."""

    def summary(values: list[float]) -> str:
        if not values:
            return "none measured"
        pct = sorted(100 * (v - 1) for v in values)
        return f"{pct[0]:+.0f}% to {pct[-1]:+.0f}% (median {statistics.median(pct):+.0f}%, {len(pct)} tests)"

    inside = [r for t, r in ratios.items() if t in reached]
    outside = [r for t, r in ratios.items() if t not in reached]
    return f"plant measured by pytest-benchmark: reached {summary(inside)}; not reached {summary(outside)}"


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


class Runner:
    """Runs the suite's sessions in ``folder`` with ``python``; each a fresh pytest process, its log kept."""

    def __init__(self, python: Path, folder: Path) -> None:
        self.python = python
        self.folder = folder

    def run(self, session: Session, pythonpath: Path | None = None, extra_env: dict[str, str] | None = None) -> Session:
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **(extra_env or {})}
        env.pop("PYTEST_ADDOPTS", None)
        env.pop("PYTHONPATH", None)
        if pythonpath is not None:
            env["PYTHONPATH"] = str(pythonpath)
        results = self.folder / f"{session.name}.json"
        gpuperf = "--gpuperf" in session.args
        command = [str(self.python), "-m", "pytest", "-p", "no:cacheprovider", *session.args, SUITE]
        if gpuperf:
            command.insert(-1, f"--gpuperf-json={results}")
        started = time.perf_counter()
        done = subprocess.run(command, cwd=self.folder, env=env, capture_output=True, text=True, check=False)
        session.wall_s = time.perf_counter() - started
        (self.folder / f"{session.name}.log").write_text(done.stdout + done.stderr)
        session.rc = done.returncode
        session.summary = next((ln for ln in reversed(done.stdout.splitlines()) if " in " in ln and "=" in ln),
                               "").strip("= ")  # fmt: skip
        if gpuperf and results.exists():
            session.verdicts = verdicts(results)
        return session


def find_reached(runner: Runner, package: Path) -> list[str]:
    """The tests whose timed function reaches the plant: a run of pytest-benchmark alone with the recording
    plant in a copy of ``package``, timing nothing."""
    calls = runner.folder / "reach-calls.log"  # beside the session's own log, reach.log
    calls.unlink(missing_ok=True)
    recording = planted_copy(package, runner.folder / "recording-site", recording_tail())
    runner.run(Session("reach", ["-p", "no:gpuperf", "--benchmark-disable"]), recording, {REACH_LOG: str(calls)})
    return reached_tests(calls.read_text()) if calls.exists() else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True, help="download the sdist and make the environment here")
    parser.add_argument("--unchanged", type=int, default=3, help="unchanged gating sessions (default 3)")
    parser.add_argument("--plant", action="store_true", help="also gate a slowdown planted in schema generation")
    parser.add_argument("--plant-work", type=int, default=PLANT_WORK, help="loop iterations the plant adds per call")
    parser.add_argument("--background-load", type=int, default=0, help="intermittent noisy neighbours throughout")
    parser.add_argument("--hogs", type=int, default=0, help="processes spinning a full core throughout")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    args.cache = args.cache.absolute()  # the sessions run in a folder of their own (not resolved: venv links)
    args.cache.mkdir(parents=True, exist_ok=True)
    source = sdist(args.cache)
    python = environment(args.cache / "venv")
    folder = args.cache / "pydantic-suite-run"
    suite_copy(source, folder)
    runner = Runner(python, folder)
    gate = ["--gpuperf", f"--gpuperf-baseline-dir={folder / 'baselines'}"]
    plain_args = ["-p", "no:gpuperf", "--benchmark-enable"]
    figures: dict[str, object] = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                    "python": platform.python_version(), "platform": platform.platform()},
        "pydantic": PYDANTIC, "torch_installed": has_torch(python), "load_before": os.getloadavg(),
        "background_load": describe(args.background_load), "hogs": describe(args.hogs, kind="hog"),
    }  # fmt: skip
    print(f"pydantic {PYDANTIC}: {SUITE} in {folder}; torch in the environment: "
          f"{'yes' if figures['torch_installed'] else 'no'}")  # fmt: skip
    print(f"load: {args.background_load} intermittent neighbours, {args.hogs} hogs; load before: {load()}", flush=True)

    reached = find_reached(runner, pydantic_package(python)) if args.plant else []
    if args.plant:
        print(f"{len(reached)} tests reach GenerateSchema.generate_schema in their timed call", flush=True)
    planted_site = planted_copy(pydantic_package(python), folder / "planted-site", planted_tail(args.plant_work))

    sessions: list[Session] = []

    def report(session: Session) -> Session:
        sessions.append(session)
        print(session_line(session, sessions[0].wall_s), flush=True)
        return session

    with contextlib.ExitStack() as load_stack:
        load_stack.enter_context(BackgroundLoad(args.background_load))
        load_stack.enter_context(BackgroundLoad(args.hogs, seed=1, kind="hog"))
        report(runner.run(Session("pytest-benchmark", [*plain_args, "--benchmark-json=plain-bench.json"])))
        report(runner.run(Session("update", [*gate, "--gpuperf-update-baseline"])))
        if (folder / "baselines").is_dir():
            busy, entries = written_busy(folder / "baselines")
            figures["written_busy"] = {"busy": busy, "entries": entries}
            print(f"entries written busy: {busy} of {entries}", flush=True)
        for i in range(args.unchanged):
            report(runner.run(Session(f"unchanged-{i + 1}", gate)))
        if args.plant:
            planted_plain = Session("pytest-benchmark-plant", [*plain_args, "--benchmark-json=planted-bench.json"])
            report(runner.run(planted_plain, planted_site))
            planted = report(runner.run(Session("planted", gate), planted_site))
    figures["load_after"] = os.getloadavg()
    figures["sessions"] = [{**asdict(s), "counts": s.counts(), "over_plain": s.wall_s / sessions[0].wall_s}
                           for s in sessions]  # fmt: skip
    met = sessions[0].rc == 0 and all(s.counts()["regression"] == 0 for s in sessions if s.name.startswith("unch"))
    if args.plant:
        ratios = {}
        if (folder / "plain-bench.json").exists() and (folder / "planted-bench.json").exists():
            ratios = plant_ratios(benchmark_minimums(folder / "plain-bench.json"),
                                  benchmark_minimums(folder / "planted-bench.json"))  # fmt: skip
        print(spread_line(ratios, reached))
        outcome = plant_outcome(reached, planted)
        print(f"planted gate: caught {len(outcome['caught'])} of {len(reached)}, missed {len(outcome['missed'])}, "
              f"unreached tests failed {len(outcome['unreached_failed'])} (exit {planted.rc})")  # fmt: skip
        for test in outcome["missed"]:
            print(f"  missed: {test} ({planted.verdicts.get(test, 'no verdict')}, "
                  f"plant {100 * (ratios.get(test, float('nan')) - 1):+.0f}%)")  # fmt: skip
        for test in outcome["unreached_failed"]:
            print(f"  unreached but failed: {test}")
        figures["plant"] = {"work": args.plant_work, "reached": reached, "ratios": ratios, **outcome}
        met = met and planted.rc == 1 and not outcome["unreached_failed"]
    print(f"load after: {load()}; logs in {folder}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
