"""What a judged time statistic could resolve: ``gpuperf_values.detectable``.

The gate's minimum detectable change of the comparison that judged the value (a fraction: 0.012 is
1.2%; ``model.Detectable``), or NULL where no comparison judged it and for every value stored before
this revision.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("gpuperf_values", sa.Column("detectable", sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gpuperf_values") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("detectable")
