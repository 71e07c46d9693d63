from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_report_helpers import BASE, BASE_SESSION, ENV, HEAD, HEAD_SESSION

from pytest_gpuperf.baseline.record import entry_from_measurement
from pytest_gpuperf.cli.compare import compare_files, compare_sessions
from pytest_gpuperf.config import GateSettings, Mode
from pytest_gpuperf.model import MeasurementResult, Provenance, SessionResults, Verdict
from pytest_gpuperf.report.results_json import ResultsError, write_results
from pytest_gpuperf.verdict import Reference, judge
from tests.cli_helpers import run
from tests.test_busy_baseline import BUSY
from tests.verdict_helpers import ENV as CPU
from tests.verdict_helpers import cpu_rules, measurement


def test_head_is_judged_against_base_by_the_gate() -> None:
    outcome = compare_sessions(BASE_SESSION, HEAD_SESSION, base_label="base.json")
    verdicts = {r.measurement.test_id.split("::")[1]: r.verdict for r in outcome.session.results}
    assert verdicts == {
        "test_slower": Verdict.REGRESSION,
        "test_same": Verdict.UNCHANGED,
        "test_faster": Verdict.IMPROVEMENT,
        "test_added": Verdict.NEW,
    }
    assert outcome.removed == ("tests/t.py::test_gone::default",)
    session = outcome.session
    assert session.mode is Mode.COMPARE_FILES
    assert session.compare_ref == "base.json"
    assert session.base_provenance == BASE
    assert session.provenance == HEAD
    slower = session.results[0]
    assert slower.baseline is not None
    assert slower.baseline.provenance == BASE
    timing = slower.comparisons[0]
    assert timing.metric == "time.p50"
    assert timing.change == pytest.approx(0.5)
    assert timing.baseline_commit == BASE.commit


def test_settings_reach_the_gate() -> None:
    lenient = GateSettings(threshold=0.9)
    outcome = compare_sessions(BASE_SESSION, HEAD_SESSION, lenient)
    slower = outcome.session.results[0]
    assert slower.verdict is Verdict.UNCHANGED
    assert slower.comparisons[0].threshold == pytest.approx(0.9)


def test_other_device_class_is_not_comparable() -> None:
    elsewhere = dataclasses.replace(BASE_SESSION, environment=dataclasses.replace(ENV, device_class="cpu-x86"))
    outcome = compare_sessions(elsewhere, HEAD_SESSION)
    assert {r.verdict for r in outcome.session.results if "added" not in r.measurement.test_id} == {
        Verdict.NOT_COMPARABLE
    }


def test_compare_files_reads_both_and_names_a_bad_one(tmp_path: Path) -> None:
    base = write_results(tmp_path / "base.json", BASE_SESSION)
    head = write_results(tmp_path / "head.json", HEAD_SESSION)
    outcome = compare_files(base, head)
    assert outcome.session.compare_ref == str(base)
    assert sum(r.verdict is Verdict.REGRESSION for r in outcome.session.results) == 1
    head.write_text("[]")
    with pytest.raises(ResultsError, match=r"head\.json"):
        compare_files(base, head)


def test_gpuperf_compare_judges_with_the_noise_the_store_would_record() -> None:
    from pytest_gpuperf import stats
    from pytest_gpuperf.cli.compare import base_entries

    first = BASE_SESSION.results[0]
    spread = dataclasses.replace(first.measurement, process_medians_ns=(1000.0, 1300.0, 1600.0))
    base = dataclasses.replace(BASE_SESSION, results=(dataclasses.replace(first, measurement=spread),))
    entry = base_entries(base)[spread.key]
    assert entry.noise == stats.recorded_noise(spread.round_medians_ns, spread.process_medians_ns)
    assert entry.noise == stats.between_process_noise(spread.process_medians_ns)  # the processes' spread counts


def test_strict_fails_the_cli_compare_on_what_could_not_be_judged(tmp_path: Path) -> None:
    import io

    from pytest_gpuperf.cli import main

    elsewhere = dataclasses.replace(BASE_SESSION, environment=dataclasses.replace(ENV, device_class="cpu-x86"))
    base = write_results(tmp_path / "base.json", elsewhere)
    head = write_results(tmp_path / "head.json", HEAD_SESSION)
    out, err = io.StringIO(), io.StringIO()
    assert main(["compare", str(base), str(head)], stdout=out, stderr=err) == 0  # not comparable: passes
    assert main(["compare", str(base), str(head), "--strict"], stdout=out, stderr=err) == 1


def test_files_from_another_device_class_say_what_differs_and_how_to_record_a_baseline(tmp_path: Path) -> None:
    elsewhere = dataclasses.replace(BASE_SESSION, environment=dataclasses.replace(ENV, device_class="cpu-x86"))
    base = write_results(tmp_path / "base.json", elsewhere)
    head = write_results(tmp_path / "head.json", HEAD_SESSION)
    code, out, _ = run("compare", str(base), str(head))
    lines = out.strip().splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("gpuperf: "))
    last = " ".join(line.strip() for line in lines[start:])  # the run's last line, as wrapped for the terminal
    assert code == 0 and "could not be judged: 3 not comparable (reference)" in last, out
    assert (
        f"measured on device class {ENV.device_class}, the reference on cpu-x86: compare with a base measured "
        "on this device class, or record baselines on this device class with --gpuperf-update-baseline" in last
    )
    assert "quieter runner" not in last


def test_the_recorded_host_state_is_judged_as_the_session_judged_it(tmp_path: Path) -> None:
    """Two unchanged runs on a busy runner: the session called the move unstable, and so does the CLI."""
    base_m, head_m = measurement(1000.0), measurement(1300.0, health=BUSY)  # +30% while the runner was busy
    entry = entry_from_measurement(base_m, CPU, Provenance(), recorded_at="2026-11-28T00:00:00")
    in_session = judge(head_m, Reference(entry=entry), GateSettings(), cpu_rules(), CPU)
    assert in_session.verdict is Verdict.UNSTABLE

    def session(m: object, verdict_of: MeasurementResult | None) -> SessionResults:
        result = verdict_of or MeasurementResult(m)  # type: ignore[arg-type]
        return SessionResults((result,), CPU, Provenance(), "baseline", "2026-11-28T00:00:00")

    base = write_results(tmp_path / "run-1.json", session(base_m, None))
    head = write_results(tmp_path / "run-2.json", session(head_m, in_session))
    outcome = compare_files(base, head)
    assert [r.verdict for r in outcome.session.results] == [Verdict.UNSTABLE]
    assert "busy-runner" in [n.rule for n in outcome.session.results[0].comparisons[0].explanation]
    code, out, _ = run("compare", str(base), str(head))
    assert (
        code == 0 and "1 unstable" in out and "1 of 1 measurement could not be judged: 1 unstable (busy-runner)" in out
    )
    assert run("compare", "--strict", str(base), str(head))[0] == 1
    judged_anyway = run("compare", "--busy-policy=judge", str(base), str(head))  # as a session under judge
    assert judged_anyway[0] == 1 and "1 regression," in judged_anyway[1]
