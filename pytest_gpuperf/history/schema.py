"""The history store's tables (SQLAlchemy Core): one schema for SQLite and PostgreSQL.

``gpuperf_runs`` holds one row per measuring session (or ingested results file),
``gpuperf_values`` one row per statistic of each measurement in it. Times and commit dates
are ISO 8601 strings in UTC, so they sort as text on both databases. The schema's version
is Alembic's, in ``gpuperf_alembic_version`` (migrations/); a change here needs a new
revision there. The text limits every backend keeps alike are declared in
``model/storable.py``; runs are checked against them when built (``model.RunRecord``).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

from pytest_gpuperf.model.storable import STATISTIC_MAX_CHARS, UNIT_MAX_CHARS

VERSION_TABLE = "gpuperf_alembic_version"

metadata = MetaData()

runs = Table(
    "gpuperf_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("commit", String(64), nullable=True),
    Column("branch", Text, nullable=True),
    Column("started_at", String(40), nullable=False),
    Column("commit_date", String(40), nullable=True),
    Column("runner", Text, nullable=False),
    Column("device_class", Text, nullable=False),
    Column("mode", String(32), nullable=False),
    Column("source", String(32), nullable=False),
    Column("baseline_update", Boolean, nullable=False, default=False),
    Column("environment", JSON, nullable=False),
    Column("stored_at", String(40), nullable=False),
    # the series' order: commit date, then the run's own time
    Index("ix_gpuperf_runs_order", "device_class", "branch", "commit_date", "started_at"),
)

values = Table(
    "gpuperf_values",
    metadata,
    Column("run_id", String(64), ForeignKey("gpuperf_runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("test", Text, primary_key=True),
    Column("measurement", Text, primary_key=True),
    Column("statistic", String(STATISTIC_MAX_CHARS), primary_key=True),
    Column("value", Float, nullable=False),
    Column("unit", String(UNIT_MAX_CHARS), nullable=False),
    Column("better", String(8), nullable=False),
    Column("ci_low", Float, nullable=True),
    Column("ci_high", Float, nullable=True),
    Column("p10", Float, nullable=True),
    Column("p90", Float, nullable=True),
    Column("samples", Integer, nullable=True),
    Column("verdict", String(32), nullable=True),
    Column("profile_diff", JSON(none_as_null=True), nullable=True),
    # the evidence that the runner was busy while it measured (pytest_gpuperf/model/busy.py), else NULL
    Column("busy", Text, nullable=True),
    # the minimum detectable change of the comparison that judged it (model.Detectable.change), else NULL
    Column("detectable", Float, nullable=True),
    Index("ix_gpuperf_values_series", "test", "measurement", "statistic"),
)
