"""Baselines timed by the candidates' protocol: how a baseline was timed, and its interval.

Before this revision the eager and torch.compile baselines were timed in one child on its own clock, re-timing one
warm input (a ReLU's eager time read 0.023 ms there, 0.11 ms through the parent-clocked protocol every candidate's
reference goes through). Those rows keep `method` NULL: no release after this one reuses them, it measures the
problem again and replaces the row.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("baselines") as table:
        table.add_column(sa.Column("method", sa.String(40), nullable=True))
        table.add_column(sa.Column("compile_speedup", sa.Float, nullable=True))
        table.add_column(sa.Column("compile_speedup_ci", sa.JSON, nullable=True))
        table.add_column(sa.Column("timing", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("baselines") as table:
        for column in ("timing", "compile_speedup_ci", "compile_speedup", "method"):
            table.drop_column(column)
