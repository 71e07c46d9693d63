"""A value measured on a busy runner says so: ``gpuperf_values.busy``.

The evidence (the contention counters over the measurement, or the GPU's throttling; see
``pytest_gpuperf/model/busy.py``), or NULL for a quiet measurement and for every value stored
before this revision (unknown is not busy).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("gpuperf_values", sa.Column("busy", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gpuperf_values") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("busy")
