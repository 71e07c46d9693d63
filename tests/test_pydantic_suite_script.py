"""benchmarks/pydantic_suite.py: the plant in a copy of the package, what the recording counts, the
figures read from each session's files, and the sessions of a tiny fake suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from benchmark_scripts import benchmark_script

GENERATE_SCHEMA = """
class GenerateSchema:
    def generate_schema(self, obj):
        return ("schema", obj)
"""


def fake_pydantic(root: Path) -> Path:
    """A package named pydantic with the planted module and class, nothing else."""
    package = root / "pydantic"
    (package / "_internal").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_internal" / "__init__.py").write_text("")
    (package / "_internal" / "_generate_schema.py").write_text(GENERATE_SCHEMA)
    return package


def run_python(code: str, pythonpath: Path, **env: str) -> str:
    environment = {**os.environ, **env, "PYTHONPATH": str(pythonpath)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_plant_wraps_generate_schema_in_a_copy_and_leaves_the_package_alone(tmp_path: Path) -> None:
    package = fake_pydantic(tmp_path / "installed")
    with benchmark_script("pydantic_suite") as script:
        site = script.planted_copy(package, tmp_path / "planted", script.planted_tail(500))
    assert (package / "_internal" / "_generate_schema.py").read_text() == GENERATE_SCHEMA
    planted = (site / "pydantic" / "_internal" / "_generate_schema.py").read_text()
    assert planted.startswith(GENERATE_SCHEMA) and "range(500)" in planted
    probe = """
        from pydantic._internal._generate_schema import GenerateSchema
        print(GenerateSchema.generate_schema.__name__, GenerateSchema().generate_schema(3))
    """
    assert run_python(probe, site) == "_planted_generate_schema ('schema', 3)"
    assert run_python(probe, package.parent) == "generate_schema ('schema', 3)"  # the unplanted package


def test_the_recording_counts_calls_from_inside_the_timed_function_only(tmp_path: Path) -> None:
    package = fake_pydantic(tmp_path / "installed")
    fixture = tmp_path / "lib" / "pytest_benchmark" / "fixture.py"  # where pytest-benchmark calls the timed function
    fixture.parent.mkdir(parents=True)
    (fixture.parent / "__init__.py").write_text("")  # a package, ahead of an installed pytest-benchmark
    fixture.write_text("def timed(function):\n    return function()\n")
    log = tmp_path / "reach.log"
    with benchmark_script("pydantic_suite") as script:
        site = script.planted_copy(package, tmp_path / "recording", script.recording_tail())
        run_python(f"""
            import os, sys
            sys.path.insert(0, {str(fixture.parent.parent)!r})
            from pytest_benchmark.fixture import timed
            from pydantic._internal._generate_schema import GenerateSchema
            os.environ["PYTEST_CURRENT_TEST"] = "tests/benchmarks/test_a.py::test_defines_then_times (call)"
            GenerateSchema().generate_schema(1)  # a model defined in the test, before it is timed
            os.environ["PYTEST_CURRENT_TEST"] = "tests/benchmarks/test_a.py::test_times (call)"
            timed(lambda: GenerateSchema().generate_schema(2))
            os.environ["PYTEST_CURRENT_TEST"] = "tests/benchmarks/test_a.py::test_fixture (setup)"
            timed(lambda: GenerateSchema().generate_schema(3))
        """, site, **{script.REACH_LOG: str(log)})  # fmt: skip
        assert log.read_text().splitlines() == ["tests/benchmarks/test_a.py::test_times (call)",
                                                "tests/benchmarks/test_a.py::test_fixture (setup)"]  # fmt: skip
        assert script.reached_tests(log.read_text()) == ["tests/benchmarks/test_a.py::test_times"]


def results_file(path: Path, verdicts: dict[str, str]) -> Path:
    results = [{"key": f"{test}::call", "verdict": verdict, "measurement": {"test_id": test}}
               for test, verdict in verdicts.items()]  # fmt: skip
    path.write_text(json.dumps({"results": results}))
    return path


def test_a_session_line_gives_exit_counts_wall_time_and_its_ratio(tmp_path: Path) -> None:
    verdicts = {"t::a": "regression", "t::b": "not gated", "t::c": "unchanged", "t::d": "unchanged", "t::e": "new"}
    with benchmark_script("pydantic_suite") as script:
        session = script.Session("planted", ["--gpuperf"], rc=1, wall_s=30.0)
        session.verdicts = script.verdicts(results_file(tmp_path / "r.json", verdicts))
        line = script.session_line(session, plain_wall_s=12.0)
        counts = session.counts()
        plain = script.session_line(script.Session("pytest-benchmark", [], wall_s=12.0), plain_wall_s=12.0)
    assert counts == {"regression": 1, "unstable": 0, "not gated": 1, "unchanged": 2, "new": 1}
    assert "exit 1" in line and "30.0 s" in line and "2.50x" in line
    assert line.endswith("regression 1, unstable 0, not gated 1, unchanged 2, new 1")
    assert "1.00x" in plain and "regression" not in plain  # a plain session judges nothing


def test_the_plant_is_judged_against_the_tests_it_reaches() -> None:
    reached = ["t::a", "t::b", "t::c"]
    with benchmark_script("pydantic_suite") as script:
        session = script.Session("planted", [])
        session.verdicts = {"t::a": "regression", "t::b": "unstable", "t::c": "regression", "t::x": "regression",
                            "t::y": "unchanged"}  # fmt: skip
        outcome = script.plant_outcome(reached, session)
        ratios = script.plant_ratios({"t::a": 1e-4, "t::b": 2e-4, "t::y": 1e-6, "t::z": 0.0},
                                     {"t::a": 1.5e-4, "t::b": 5e-4, "t::y": 1.1e-6, "t::z": 1.0})  # fmt: skip
        line = script.spread_line(ratios, reached)
    assert outcome == {"caught": ["t::a", "t::c"], "missed": ["t::b"], "unreached_failed": ["t::x"]}
    assert ratios == pytest.approx({"t::a": 1.5, "t::b": 2.5, "t::y": 1.1})  # t::z: no plain time to divide by
    assert line == ("plant measured by pytest-benchmark: reached +50% to +150% (median +100%, 2 tests); "
                    "not reached +10% to +10% (median +10%, 1 tests)")  # fmt: skip


def test_the_sessions_of_a_tiny_fake_suite(tmp_path: Path) -> None:
    """Runner's commands against a real pytest: pytest-benchmark alone, then a gate without baselines."""
    tests = tmp_path / "suite" / "tests" / "benchmarks"
    tests.mkdir(parents=True)
    (tests / "test_tiny.py").write_text("def test_sum(benchmark):\n    benchmark(sum, range(50))\n")
    (tmp_path / "suite" / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nfilterwarnings = ["error"]\naddopts = ["--benchmark-disable"]\n'
    )
    with benchmark_script("pydantic_suite") as script:
        runner = script.Runner(Path(sys.executable), tmp_path / "suite")
        plain = runner.run(script.Session("pytest-benchmark", ["-p", "no:gpuperf", "--benchmark-enable",
                                                               "--benchmark-json=bench.json"]))  # fmt: skip
        quickest = script.benchmark_minimums(tmp_path / "suite" / "bench.json")
        gate = runner.run(script.Session("gate", ["--gpuperf", f"--gpuperf-baseline-dir={tmp_path / 'baselines'}"]))
    assert plain.rc == 0 and "1 passed" in plain.summary and not plain.verdicts
    assert list(quickest) == ["tests/benchmarks/test_tiny.py::test_sum"] and next(iter(quickest.values())) > 0
    assert (tmp_path / "suite" / "gate.log").exists() and gate.rc == 0, (tmp_path / "suite" / "gate.log").read_text()
    assert gate.verdicts == {"tests/benchmarks/test_tiny.py::test_sum": "new"}


def test_the_reach_run_finds_the_tests_whose_timed_call_reaches_the_plant(tmp_path: Path) -> None:
    package = fake_pydantic(tmp_path / "installed")
    tests = tmp_path / "suite" / "tests" / "benchmarks"
    tests.mkdir(parents=True)
    (tests / "test_schemas.py").write_text(textwrap.dedent("""
        from pydantic._internal._generate_schema import GenerateSchema

        def test_times_schema_generation(benchmark):
            benchmark(lambda: GenerateSchema().generate_schema(1))

        def test_builds_a_schema_then_times_something_else(benchmark):
            GenerateSchema().generate_schema(2)
            benchmark(sum, range(10))
    """))  # fmt: skip
    with benchmark_script("pydantic_suite") as script:
        reached = script.find_reached(script.Runner(Path(sys.executable), tmp_path / "suite"), package)
    assert reached == ["tests/benchmarks/test_schemas.py::test_times_schema_generation"]
    assert "2 passed" in (tmp_path / "suite" / "reach.log").read_text()  # the session's log, kept apart
