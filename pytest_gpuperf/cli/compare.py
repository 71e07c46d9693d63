"""Two results files, base and head, compared as the gate would (``gpuperf compare``).

Each base measurement becomes the baseline entry it would have been stored as, so two
CI artifacts reach the same verdicts as a run against a recorded baseline.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.baseline.record import entry_from_measurement
from pytest_gpuperf.config import BusyPolicy, GateSettings
from pytest_gpuperf.measure.host import recorded_rules
from pytest_gpuperf.model import BaselineEntry, SessionResults
from pytest_gpuperf.modes import Mode, plan_for
from pytest_gpuperf.report.results_json import load_results
from pytest_gpuperf.verdict import Reference, judge
from pytest_gpuperf.verdict.rulesets import rules_for


@dataclass(frozen=True)
class FileComparison:
    """Head's measurements judged against base's; ``removed``: keys only base has."""

    session: SessionResults
    removed: tuple[str, ...]


def base_entries(base: SessionResults) -> dict[str, BaselineEntry]:
    """Every measurement of ``base`` as the baseline entry the store would keep."""
    return {
        r.measurement.key: entry_from_measurement(
            r.measurement, base.environment, base.provenance, recorded_at=base.started_at
        )
        for r in base.results
    }


def compare_sessions(
    base: SessionResults, head: SessionResults, settings: GateSettings | None = None, *, base_label: str | None = None,
    busy_policy: BusyPolicy = BusyPolicy.RETAKE,
) -> FileComparison:  # fmt: skip
    """Judge every measurement of ``head`` against the same key in ``base``; ``busy_policy``: the sessions'."""
    gate = settings or GateSettings()
    entries = base_entries(base)
    # the host state each measurement recorded (contention, speed probe) is judged as its session judged it
    plan = plan_for(Mode.COMPARE_FILES)
    guard = recorded_rules(head.environment.device_type, plan=plan, busy_policy=busy_policy)
    rules = rules_for(plan, guard)
    results = []
    for r in head.results:
        entry = entries.get(r.measurement.key)
        judged = judge(r.measurement, Reference(entry=entry), gate, rules, head.environment)
        results.append(dataclasses.replace(judged, outcome=r.outcome))
    head_keys = {r.measurement.key for r in head.results}
    session = SessionResults(
        results=tuple(results),
        environment=head.environment,
        provenance=head.provenance,
        mode=Mode.COMPARE_FILES,
        started_at=head.started_at,
        compare_ref=base_label or base.provenance.commit or base.started_at,
        base_provenance=base.provenance,
    )
    return FileComparison(session, tuple(sorted(set(entries) - head_keys)))


def compare_files(
    base_path: Path | str, head_path: Path | str, settings: GateSettings | None = None, *,
    busy_policy: BusyPolicy = BusyPolicy.RETAKE,
) -> FileComparison:  # fmt: skip
    """Load two results files (schema-checked) and compare head against base."""
    base, head = load_results(base_path), load_results(head_path)
    return compare_sessions(base, head, settings, base_label=str(base_path), busy_policy=busy_policy)
