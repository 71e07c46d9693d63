"""The first schema: runs and their values.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gpuperf_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("commit", sa.String(64), nullable=True),
        sa.Column("branch", sa.Text, nullable=True),
        sa.Column("started_at", sa.String(40), nullable=False),
        sa.Column("commit_date", sa.String(40), nullable=True),
        sa.Column("runner", sa.Text, nullable=False),
        sa.Column("device_class", sa.Text, nullable=False),
        sa.Column("mode", sa.String(32), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("baseline_update", sa.Boolean, nullable=False),
        sa.Column("environment", sa.JSON, nullable=False),
        sa.Column("stored_at", sa.String(40), nullable=False),
    )
    op.create_index("ix_gpuperf_runs_order", "gpuperf_runs", ["device_class", "branch", "commit_date", "started_at"])
    op.create_table(
        "gpuperf_values",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("gpuperf_runs.run_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("test", sa.Text, primary_key=True),
        sa.Column("measurement", sa.Text, primary_key=True),
        sa.Column("statistic", sa.String(200), primary_key=True),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("unit", sa.String(64), nullable=False),
        sa.Column("better", sa.String(8), nullable=False),
        sa.Column("ci_low", sa.Float, nullable=True),
        sa.Column("ci_high", sa.Float, nullable=True),
        sa.Column("p10", sa.Float, nullable=True),
        sa.Column("p90", sa.Float, nullable=True),
        sa.Column("samples", sa.Integer, nullable=True),
        sa.Column("verdict", sa.String(32), nullable=True),
        sa.Column("profile_diff", sa.JSON(none_as_null=True), nullable=True),
    )
    op.create_index("ix_gpuperf_values_series", "gpuperf_values", ["test", "measurement", "statistic"])


def downgrade() -> None:
    op.drop_table("gpuperf_values")
    op.drop_table("gpuperf_runs")
