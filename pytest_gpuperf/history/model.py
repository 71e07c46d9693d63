"""The performance history's data: recorded runs, the series read back from a store, change points.

Plain frozen dataclasses shared by the store (``store.py``), the ingest of results files
(``ingest.py``), the change-point detector (``detect.py``), the dashboard (``dashboard/``) and
the alerts. Nothing here touches a database, pytest or torch.

Units: times in nanoseconds, memory in bytes, metrics in their own unit; relative changes as
fractions (0.05 = 5%). Commits are full 40-character hashes wherever the store has them.
"""

from __future__ import annotations

import datetime as _dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_gpuperf.errors import RunError
from pytest_gpuperf.model import Direction, Verdict
from pytest_gpuperf.model.storable import STATISTIC_MAX_CHARS, UNIT_MAX_CHARS, first_unstorable, unstorable
from pytest_gpuperf.modes import Mode


class ChangeKind(str, enum.Enum):
    """What a level change means for the series' direction (``better``)."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"


@dataclass(frozen=True)
class SeriesKey:
    """One series: a statistic of one measurement, on one device class and branch.

    Runners of the same device class pool into one series (their points carry the runner's
    name); runners of different classes never mix.
    """

    test: str  # the pytest node id
    measurement: str  # the measurement's name ("default", "fused", "benchmark", ...)
    statistic: str  # "time.p50", "memory.peak_allocated", "metric.speedup", ...
    device_class: str
    branch: str

    @property
    def label(self) -> str:
        """A one-line name for tables and page titles."""
        return f"{self.test}::{self.measurement} {self.statistic} [{self.device_class}, {self.branch}]"


@dataclass(frozen=True)
class RecordedValue:
    """One statistic of one measurement in one run, as stored."""

    test: str
    measurement: str
    statistic: str  # as in SeriesKey
    value: float
    unit: str  # "ns", "bytes", or a metric's unit
    better: Direction = "lower"
    ci_low: float | None = None  # 95% interval of ``value`` from the run's own samples
    ci_high: float | None = None
    p10: float | None = None  # the run's spread, for the dashboard's band
    p90: float | None = None
    samples: int | None = None  # how many samples the value rests on
    verdict: Verdict | None = None  # the gate's verdict in that run, if it judged
    profile_diff: Mapping[str, object] | None = None  # results-file JSON of a confirmed regression's diff
    busy: str | None = None  # the evidence that the runner was busy while it measured (pytest_gpuperf/model/busy.py)
    detectable: float | None = None  # the smallest change the gate that judged it could resolve (model.Detectable)


@dataclass(frozen=True)
class RunRecord:
    """One measuring session (or one ingested results file) as the store keeps it.

    ``run_id`` is derived from the content (see ``ingest.run_identity``), so the same
    session stored twice, or from several processes at once, is one run; ``earlier_ids``
    are the ids earlier versions gave it, so a store that kept it under one keeps it once.
    """

    run_id: str
    commit: str | None
    branch: str | None
    started_at: str  # ISO 8601
    runner: str  # the machine's name (GPUPERF_RUNNER, else the host name)
    device_class: str
    mode: Mode  # stored as its word: "baseline", "compare-ref" (the head's numbers), "update"
    environment: Mapping[str, object]  # driver, CUDA, torch, GPU model and count, ...
    values: tuple[RecordedValue, ...]
    source: str = "session"  # "session", "results-file", "baselines-git"
    commit_date: str | None = None  # ISO 8601 commit time: the series' order
    baseline_update: bool = False  # the run wrote baselines (an intended level change)
    # the ids earlier versions stored this run under: a store holding one already has the run
    earlier_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """RunError for what the store cannot keep: a time that is not ISO 8601, a statistic given twice,
        a mode that is none (its word is taken for it)."""
        try:
            object.__setattr__(self, "mode", Mode(self.mode))
        except ValueError:
            raise RunError(f"mode {self.mode!r} is none of {', '.join(m.value for m in Mode)}", field="mode") from None
        for name in ("started_at", "commit_date"):
            text = getattr(self, name)
            if text is not None and parse_time(text) is None:
                raise RunError(f"{name} {text!r} is not an ISO 8601 time", field=name)
        _check_storable(self)
        seen: set[tuple[str, str, str]] = set()
        for value in self.values:
            key = (value.test, value.measurement, value.statistic)
            if key in seen:
                raise RunError(f"measurement {value.test}::{value.measurement} appears more than once "
                               f"({value.statistic} twice): one run holds each measurement once",
                               field=f"{value.test}::{value.measurement}")  # fmt: skip
            seen.add(key)


# The run's texts with the most a store keeps of each (None: no limit of its own), and its JSON.
_RUN_TEXTS = {"commit": 64, "branch": None, "started_at": 40, "commit_date": 40, "runner": None, "device_class": None}
_VALUE_TEXTS = {"test": None, "measurement": None, "statistic": STATISTIC_MAX_CHARS, "unit": UNIT_MAX_CHARS}


def _check_storable(run: RunRecord) -> None:
    """RunError for any text of ``run`` one backend could store and another not (``model/storable.py``)."""
    for name, limit in _RUN_TEXTS.items():
        text = getattr(run, name)
        if isinstance(text, str) and (reason := unstorable(text, limit=limit)):
            raise RunError(f"{name} {text[:80]!r} {reason}", field=name)
    if found := first_unstorable(run.environment):
        raise RunError(f"the environment's text at {found[0]} {found[1]}", field="environment")
    for value in run.values:
        where = f"{value.test}::{value.measurement}"
        for name, limit in _VALUE_TEXTS.items():
            text = getattr(value, name)
            if isinstance(text, str) and (reason := unstorable(text, limit=limit)):
                raise RunError(f"measurement {where[:200]!r}: its {name} {reason}", field=where)
        if value.profile_diff is not None and (found := first_unstorable(value.profile_diff)):
            raise RunError(f"measurement {where[:200]!r}: its profile diff's text at {found[0]} {found[1]}",
                           field=where)  # fmt: skip


def parse_time(text: str) -> _dt.datetime | None:
    """An ISO 8601 time in UTC (``Z`` allowed; a naive time is taken as UTC); None when ``text`` is not one."""
    try:
        moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=_dt.timezone.utc)
        return moment.astimezone(_dt.timezone.utc)
    except (ValueError, OverflowError):  # not a time, or one that leaves the calendar once in UTC
        return None


@dataclass(frozen=True)
class Point:
    """One run's value in a series, oldest first in :class:`Series`."""

    run_id: str
    commit: str
    started_at: str
    runner: str
    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    p10: float | None = None
    p90: float | None = None
    samples: int | None = None
    verdict: Verdict | None = None
    baseline_update: bool = False
    has_profile_diff: bool = False
    commit_date: str | None = None
    busy: str | None = None  # measured on a busy runner (the evidence): drawn apart, left out of change points
    detectable: float | None = None  # the smallest change the gate could resolve in that run (model.Detectable)


@dataclass(frozen=True)
class Series:
    """The points of one series in commit order (commit date, then run time)."""

    key: SeriesKey
    unit: str
    better: Direction
    points: tuple[Point, ...]


@dataclass(frozen=True)
class ChangePoint:
    """A level change in a series, named by the commit range it happened in.

    ``last_good`` is the last commit at the old level, ``first_bad`` the first at the new
    one (for an improvement, "bad" reads "changed"). ``change`` is the relative change of
    the level, ``ci_low``/``ci_high`` its 95% interval, ``p_value`` the detector's test.
    ``runs_after`` counts the runs at or after ``first_bad``: a nightly alert looks at
    change points whose ``runs_after`` is small. A ``pending`` change has a level at one of
    the series' ends holding fewer runs than ``DetectorConfig.settle_runs``: two slowed runs
    in a row read the same as a level's two runs, so it is reported as needing more runs, and
    no alert is raised for it until a further run at the newest end confirms it.

    As an event (``history.events``), a change point is the lead of the statistics of one
    measurement that changed at one place; the others are its ``supporting`` evidence.
    """

    key: SeriesKey
    last_good: str
    first_bad: str
    index: int  # the index in ``Series.points`` of the first point at the new level
    before: float
    after: float
    change: float
    ci_low: float
    ci_high: float
    p_value: float
    kind: ChangeKind
    runs_after: int
    gradual: bool = False  # a creep spread over several commits rather than one step
    unit: str = ""  # the series' unit ("ns", "bytes", a metric's), for ``before``/``after``
    details: Mapping[str, object] = field(default_factory=dict)
    supporting: tuple[ChangePoint, ...] = ()  # the same change seen in the measurement's other statistics
    pending: bool = False  # a level at the series' newest (or oldest) end holds too few runs yet to confirm it
    p_floor: float = 0.0  # the smallest p-value its permutation test can give, 1 / (permutations + 1); 0: unknown

    @property
    def p_text(self) -> str:
        """The p-value as reports print it: ``0.0012``, or ``< 0.0025`` below what the permutations can give.

        A split the F test kept reports its p-value scaled onto ``alpha`` (history/detect.py): a bound
        on the chance, not a figure to read to the digit (a printed 2.5e-12 would claim what no test showed).
        """
        if self.p_value < self.p_floor:
            return f"< {self.p_floor:.2g}"
        return f"{self.p_value:.2g}" if self.p_value >= 0.001 else f"{self.p_value:.1e}"

    @property
    def kind_label(self) -> str:
        """The kind as tables show it: ``regression``, ``improvement (gradual)``, ``regression (pending)``..."""
        return self.kind.value + (" (gradual)" if self.gradual else "") + (" (pending)" if self.pending else "")

    def with_supporting(self) -> tuple[ChangePoint, ...]:
        """This change point and its supporting ones: every series the event was seen in."""
        return (self, *self.supporting)
