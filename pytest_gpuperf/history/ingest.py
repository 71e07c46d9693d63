"""Results files, sessions and the baselines' git history as :class:`RunRecord` for the store.

What a run records for every measurement (``measurement_values``):

- ``time.p50`` with its 95% interval (order statistics of the run's own samples, else its
  recorded precision), the samples' 10th and 90th percentiles and their count;
  ``time.mean``, ``time.min``, ``time.p90``, ``time.p99``;
- ``memory.peak_allocated`` and ``memory.peak_reserved`` (bytes) where measured;
- ``metric.NAME`` for each metric, with its unit and direction;
- the gate's verdict on each statistic it judged, and on the judged time statistic of a
  confirmed regression, its differential profile;
- where the scheduler's accounting was recorded (model/scheduling.py), ``time.p50_less_wait``, the
  median with the run-queue wait taken out, which a busy run does not inflate (never marked busy
  unless its correction is uncertain by 5% or more), and ``contention.wait_share``, the share of
  the time that waited;
- on every other value, whether the runner was busy while it measured (``busy.busy_evidence``: the
  contention counters the measurement carries, or its GPU's throttling);
- on a GPU, the device's state while it measured (``device.sm_clock``, ``device.mem_clock`` in MHz,
  ``device.power`` in W, ``device.temperature`` in °C: the medians NVML read beside the samples),
  which the change points of its time cite as supporting evidence (``events.py``).
- on the judged time statistic, the gate's minimum detectable change (``model.Detectable``), so
  that a dashboard shows what each test could resolve over time.

A run's identity (``run_identity``) is a hash of the session's identifying fields (never of a
file's bytes), so a session recorded by pytest and its results file ingested later, in any format
version, or one file ingested twice or by several processes at once, are one run. A run stored
under the id of earlier versions (a hash of the results file's JSON) is recognised by that id.

A value that is not finite (a NaN metric) is not stored, and a NaN or infinity in what a run
keeps as JSON (its environment, a profile diff) is stored as null: recording never fails on one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_gpuperf.errors import GpuperfError, ResultsError, RunError, StoreError
from pytest_gpuperf.history.model import RecordedValue, RunRecord
from pytest_gpuperf.model import (
    BaselineEntry,
    DeviceSummary,
    Direction,
    Environment,
    Kind,
    MeasurementResult,
    SessionResults,
    Verdict,
)
from pytest_gpuperf.modes import Mode, plan_for

if TYPE_CHECKING:
    from pytest_gpuperf.history.baselines_git import BaselineVersion

RUNNER_ENV = "GPUPERF_RUNNER"
SOURCE_SESSION = "session"
SOURCE_FILE = "results-file"
SOURCE_BASELINES = "baselines-git"
_TIME_STATISTICS = ("p50", "mean", "min", "p90", "p99")
_UNCERTAIN_CORRECTION = 0.05  # a correction for the run-queue wait this uncertain leaves its value busy
# The device's state a value records (statistic, DeviceSummary field, unit, direction): a faster clock is better,
# less power and heat are.
_DEVICE_STATISTICS: tuple[tuple[str, str, str, Direction], ...] = (
    ("device.sm_clock", "sm_clock_mhz", "MHz", "higher"),
    ("device.mem_clock", "mem_clock_mhz", "MHz", "higher"),
    ("device.power", "power_w", "W", "lower"),
    ("device.temperature", "temperature_c", "°C", "lower"),
)
_RUN_FIELDS = {"started_at": "$.started_at", "commit_date": "$.provenance.commit_date"}  # where a file holds them


def runner_name(environ: Mapping[str, str] | None = None) -> str:
    """This machine's name in the history: ``GPUPERF_RUNNER``, else the host name."""
    env = os.environ if environ is None else environ
    return env.get(RUNNER_ENV, "").strip() or socket.gethostname() or "unknown"


def run_identity(session: SessionResults) -> str:
    """A stable id for ``session``: the SHA-256 of the fields that make it the session it is.

    When it started, at which commit and branch, on which device class, in which mode, every
    measurement's samples and every value the store keeps of it (with its verdict and whether the
    runner was busy): the model's values, not a file's bytes, so the same session reads to the same
    id from every results-file format version (and from memory, when pytest records it).
    """
    return _session_identity(session, [v for r in session.results for v in measurement_values(r)])


def _session_identity(session: SessionResults, values: Sequence[RecordedValue]) -> str:
    provenance = session.provenance
    fields = {
        "started_at": session.started_at,
        "commit": provenance.commit,
        "branch": provenance.branch,
        "device_class": session.environment.device_class,
        "mode": session.mode,  # a str or a str enum: JSON writes either as its text
        "samples": sorted(
            ([r.measurement.test_id, r.measurement.name, list(r.measurement.samples_ns)] for r in session.results),
            key=lambda row: row[:2],
        ),
        "values": sorted(
            ([v.test, v.measurement, v.statistic, v.value, v.busy, v.verdict] for v in values), key=lambda row: row[:3]
        ),
    }
    return _digest("session", fields)


def legacy_run_identity(session: SessionResults) -> str:
    """The id a run was stored under before :func:`run_identity`: a SHA-256 of its results-file JSON.

    Only to recognise runs a store kept under it (``RunRecord.earlier_ids``), so re-ingesting their
    files adds nothing; new runs are stored under :func:`run_identity`.
    """
    from pytest_gpuperf.report import codec

    document = _numbers_as_floats(codec.to_json(session))
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _digest(kind: str, fields: object) -> str:
    """SHA-256 of ``fields`` as canonical JSON (sorted keys, numbers as floats, non-finite as null)."""
    text = json.dumps(_numbers_as_floats(fields), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(f"{kind}\n{text}".encode()).hexdigest()


def _numbers_as_floats(value: object) -> object:
    """Every number as a float: a float field given an int in memory reads back as a float from its file.

    A NaN or infinity as None, as a results file stores it (JSON has neither).
    """
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _numbers_as_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_numbers_as_floats(v) for v in value]
    return value


def json_safe(value: object) -> Any:
    """``value`` with every NaN or infinity as None: what a JSON column (PostgreSQL's refuses NaN) can store."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def environment_record(environment: Environment, *, gpu_count: int | None = None) -> dict[str, object]:
    """What the store keeps of the environment: driver, CUDA, torch, GPU model and count, and the rest."""
    from pytest_gpuperf.report import codec

    record: dict[str, object] = json_safe(codec.to_json(environment))
    record["gpu_model"] = environment.device_name if environment.device_type == "cuda" else None
    count = gpu_count if gpu_count is not None else environment.extra.get("gpu_count")
    record["gpu_count"] = int(count) if count is not None else (0 if environment.device_type == "cpu" else None)
    return record


def run_from_session(
    session: SessionResults,
    *,
    source: str = SOURCE_SESSION,
    runner: str | None = None,
    gpu_count: int | None = None,
) -> RunRecord:
    """The run a measuring session makes: its commit, mode, environment and every measurement's values."""
    values: list[RecordedValue] = []
    for result in session.results:
        values.extend(measurement_values(result))
    provenance = session.provenance
    return RunRecord(
        run_id=_session_identity(session, values),
        earlier_ids=(legacy_run_identity(session),),
        commit=provenance.commit,
        branch=provenance.branch,
        started_at=session.started_at,
        runner=runner or session.environment.extra.get("runner") or runner_name(),
        device_class=session.environment.device_class,
        mode=session.mode,
        environment=environment_record(session.environment, gpu_count=gpu_count),
        values=tuple(values),
        source=source,
        commit_date=provenance.commit_date,
        baseline_update=plan_for(session.mode).writes_baselines,
    )


def measurement_values(result: MeasurementResult) -> list[RecordedValue]:
    """Every statistic the store keeps of one measurement (see the module's docstring)."""
    import numpy as np

    from pytest_gpuperf.model.busy import busy_evidence

    m = result.measurement
    busy = busy_evidence(m.health, m.unstable_reason, m.device)
    verdicts = {c.metric.replace("time.median", "time.p50"): c.verdict for c in result.comparisons}
    detectables = {c.metric.replace("time.median", "time.p50"): c.detectable.change
                   for c in result.comparisons if c.detectable is not None}  # fmt: skip
    diff_on = _profile_diff_statistic(result)
    diff = _profile_diff_json(result) if diff_on else None
    stats = m.stats
    p10, p90 = (float(x) for x in np.percentile(np.asarray(m.samples_ns, dtype=float), [10, 90]))
    low, high = median_interval(m.samples_ns, stats.median_ns, m.precision)

    def value(statistic: str, number: float, unit: str, better: Direction = "lower", **extra: Any) -> RecordedValue:
        return RecordedValue(
            test=m.test_id, measurement=m.name, statistic=statistic, value=float(number), unit=unit, better=better,
            verdict=verdicts.get(statistic), profile_diff=diff if statistic == diff_on else None, busy=busy,
            detectable=detectables.get(statistic), **extra,
        )  # fmt: skip

    out = [value("time.p50", stats.median_ns, "ns", ci_low=low, ci_high=high, p10=p10, p90=p90, samples=stats.count)]
    for name in _TIME_STATISTICS[1:]:
        out.append(value(f"time.{name}", stats.get(name), "ns", samples=stats.count))
    for name, number in (("peak_allocated", m.peak_allocated_bytes), ("peak_reserved", m.peak_reserved_bytes)):
        if number is not None:
            out.append(value(f"memory.{name}", number, "bytes"))
    for metric in m.metrics:
        if math.isfinite(metric.value):
            out.append(value(f"metric.{metric.name}", metric.value, metric.unit, metric.better))
    if m.scheduling is not None:
        corrected = m.corrected
        trusted = corrected.uncertainty < _UNCERTAIN_CORRECTION
        out.append(dataclasses.replace(value("time.p50_less_wait", corrected.median_ns, "ns", samples=stats.count),
                                       busy=None if trusted else busy))  # fmt: skip
        out.append(value("contention.wait_share", corrected.wait_share, "fraction"))
    if m.device_state is not None:
        out.extend(value(statistic, number, unit, better) for statistic, number, unit, better in
                   device_values(m.device_state.summary))  # fmt: skip
    return out


def device_values(summary: DeviceSummary) -> list[tuple[str, float, str, Direction]]:
    """(statistic, value, unit, direction) of each part of the device's state that was read."""
    read = ((statistic, getattr(summary, field), unit, better) for statistic, field, unit, better in _DEVICE_STATISTICS)
    return [(statistic, float(number), unit, better) for statistic, number, unit, better in read
            if number is not None and math.isfinite(number)]  # fmt: skip


def median_interval(
    samples: Sequence[float], median: float, precision: float | None
) -> tuple[float | None, float | None]:
    """The 95% interval of the median: order statistics of the samples, else the recorded precision, else none."""
    from pytest_gpuperf.stats import median_ci

    low, high = median_ci(samples)
    if math.isfinite(low) and math.isfinite(high):
        return low, high
    if precision is not None and math.isfinite(precision):
        return median * (1 - precision), median * (1 + precision)
    return None, None  # too few samples for an interval: say nothing rather than something wrong


def _profile_diff_statistic(result: MeasurementResult) -> str | None:
    """The time statistic a confirmed regression's profile diff belongs to (the one the gate judged)."""
    if result.profile_diff is None:
        return None
    judged = [c.metric for c in result.comparisons if c.kind is Kind.TIME and c.verdict is Verdict.REGRESSION]
    statistic = judged[0].replace("time.median", "time.p50") if judged else "time.p50"
    return statistic if statistic.removeprefix("time.") in _TIME_STATISTICS else "time.p50"


def _profile_diff_json(result: MeasurementResult) -> Mapping[str, object] | None:
    from pytest_gpuperf.report import codec

    document: Mapping[str, object] = json_safe(codec.to_json(result.profile_diff))
    return document


# -- results files --------------------------------------------------------------------------


def load_run(path: Path | str, *, runner: str | None = None) -> RunRecord:
    """The run recorded in a results file (every format version the project reads).

    ResultsError naming the file when it cannot be read, is not JSON, has an unknown
    format version or fails its schema.
    """
    from pytest_gpuperf.report.results_json import FORMAT, load_results

    source = Path(path)
    try:
        session = load_results(source)
    except ResultsError:
        raise
    except (GpuperfError, ValueError, TypeError, KeyError) as exc:  # a valid document the model still rejects
        raise ResultsError(source, f"cannot be read as a {FORMAT} document: {exc}") from None
    try:
        return run_from_session(session, source=SOURCE_FILE, runner=runner)
    except RunError as exc:  # a time that is not one, a measurement twice: the store could not keep it
        raise ResultsError(source, str(exc), json_path=_RUN_FIELDS.get(exc.field)) from None


class RunSink(Protocol):
    """Where ingested runs go (``store.HistoryStore`` is one): ``record`` is False for a run already kept."""

    def record(self, run: RunRecord) -> bool: ...


@dataclass(frozen=True)
class IngestOutcome:
    """What an ingest of several files did: runs stored, runs already there, files refused (with why)."""

    stored: tuple[Path, ...]
    already: tuple[Path, ...]
    refused: tuple[tuple[Path, str], ...]


def ingest_files(store: RunSink, paths: Sequence[Path | str], *, runner: str | None = None) -> IngestOutcome:
    """Read every file, then store each readable one as its own transaction.

    A file that cannot be read, or whose run the store refuses, is refused and none of it is
    stored; every other file is tried and stored all the same (their run ids are
    content-derived, so ingesting the whole set again once the bad file is fixed adds only
    what is new).
    """
    runs: list[tuple[Path, RunRecord]] = []
    refused: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw)
        try:
            runs.append((path, load_run(path, runner=runner)))
        except ResultsError as exc:
            refused.append((path, str(exc)))
    stored: list[Path] = []
    already: list[Path] = []
    for path, run in runs:
        try:
            (stored if store.record(run) else already).append(path)
        except StoreError as exc:  # the database's own refusal of this run: the next file may still be kept
            refused.append((path, f"results file {path}: not stored: {exc}"))
    order = {Path(p): i for i, p in enumerate(paths)}
    refused.sort(key=lambda item: order.get(item[0], 0))
    return IngestOutcome(tuple(stored), tuple(already), tuple(refused))


# -- the baselines' git history ---------------------------------------------------------------


def runs_from_baselines(baselines: Path | str, *, rev: str = "HEAD", runner: str = "baselines") -> list[RunRecord]:
    """One run per commit and device class that wrote baseline entries, from git (``baselines_git``).

    Each run holds the entries that commit changed, marked as a baseline update; its commit is
    the one that wrote them, its time the entry's ``recorded_at`` (else the commit date).
    """
    from pytest_gpuperf.history.baselines_git import read_baselines

    grouped: dict[tuple[str, str], list[BaselineVersion]] = {}
    for version in read_baselines(baselines, rev=rev).versions:
        grouped.setdefault((version.commit, version.device_class), []).append(version)
    runs = [_baseline_run(versions, runner) for versions in grouped.values()]
    runs.sort(key=lambda r: (r.commit_date or "", r.device_class))
    return runs


def _baseline_run(versions: Sequence[BaselineVersion], runner: str) -> RunRecord:
    from pytest_gpuperf.report import codec

    versions = sorted(versions, key=lambda v: v.entry.key)
    commit, device_class, date = versions[0].commit, versions[0].device_class, versions[0].date
    entries: list[BaselineEntry] = [v.entry for v in versions]
    legacy = json.dumps([commit, device_class, codec.to_json(entries)], sort_keys=True, allow_nan=False)
    identity = [commit, device_class, [[e.key, e.recorded_at, list(e.samples_ns), e.stats.median_ns] for e in entries]]
    values = [v for entry in entries for v in _entry_values(entry)]
    first = entries[0]
    environment = environment_record(first.environment) if first.environment is not None else {}
    environment["measured_commit"] = first.provenance.commit
    return RunRecord(
        run_id=_digest(SOURCE_BASELINES, identity),
        earlier_ids=(hashlib.sha256(f"{SOURCE_BASELINES}\n{legacy}".encode()).hexdigest(),),
        commit=commit,
        branch=first.provenance.branch,
        started_at=first.recorded_at or date,
        runner=runner,
        device_class=device_class,
        mode=Mode.UPDATE,
        environment=environment,
        values=tuple(values),
        source=SOURCE_BASELINES,
        commit_date=date,
        baseline_update=True,
    )


def _entry_values(entry: BaselineEntry) -> list[RecordedValue]:
    import numpy as np

    test, _, name = entry.key.rpartition("::")
    stats = entry.stats
    out = [RecordedValue(test, name, f"time.{s}", stats.get(s), "ns", samples=stats.count) for s in _TIME_STATISTICS]
    if entry.samples_ns:  # the entry keeps a thinned subset of its samples: the band and interval come from it
        p10, p90 = (float(x) for x in np.percentile(np.asarray(entry.samples_ns, dtype=float), [10, 90]))
        low, high = median_interval(entry.samples_ns, stats.median_ns, None)
        out[0] = dataclasses.replace(out[0], ci_low=low, ci_high=high, p10=p10, p90=p90)
    for statistic, number in (
        ("peak_allocated", entry.peak_allocated_bytes),
        ("peak_reserved", entry.peak_reserved_bytes),
    ):
        if number is not None:
            out.append(RecordedValue(test, name, f"memory.{statistic}", float(number), "bytes"))
    for metric in entry.metrics:
        if math.isfinite(metric.value):
            out.append(RecordedValue(test, name, f"metric.{metric.name}", metric.value, metric.unit, metric.better))
    if entry.device_state is not None:
        out.extend(RecordedValue(test, name, statistic, number, unit, better)
                   for statistic, number, unit, better in device_values(entry.device_state))  # fmt: skip
    return out
