"""Every evaluation names its judge: the checks' version (harness/decision/version.py), the protocol path its timing
took, and the evaluation it re-judged (`kernelwright rescore`).

Rows stored before this revision were judged by a harness that did not say which: their `checks_version` is
"unversioned" (so `rescore` picks them as older than any version), their protocol is read back from the record
where the harness wrote it (`isolation.protocol`), and nothing else changes.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("evaluations") as table:
        table.add_column(sa.Column("checks_version", sa.String(40), nullable=False, server_default="unversioned"))
        table.add_column(sa.Column("protocol", sa.String(40), nullable=True))
        table.add_column(sa.Column("rescore_of", sa.Integer, nullable=True))
        table.create_index("ix_evaluations_checks_version", ["checks_version"])
        table.create_foreign_key("fk_evaluations_rescore_of", "evaluations", ["rescore_of"], ["id"])
    _protocols_from_records()


def _protocols_from_records() -> None:
    """The protocol each old timed evaluation recorded in its JSON record, copied into the new column."""
    connection = op.get_bind()
    rows = connection.execute(sa.text("SELECT id, record FROM evaluations")).fetchall()
    for evaluation_id, record in rows:
        protocol = _protocol(record)
        if protocol:
            connection.execute(sa.text("UPDATE evaluations SET protocol = :protocol WHERE id = :id"),
                               {"protocol": protocol, "id": evaluation_id})


def _protocol(record: object) -> str | None:
    import json

    if isinstance(record, str):
        try:
            record = json.loads(record)
        except ValueError:
            return None
    isolation = record.get("isolation") if isinstance(record, dict) else None
    protocol = isolation.get("protocol") if isinstance(isolation, dict) else None
    return protocol if isinstance(protocol, str) else None


def downgrade() -> None:
    with op.batch_alter_table("evaluations") as table:
        table.drop_constraint("fk_evaluations_rescore_of", type_="foreignkey")
        table.drop_index("ix_evaluations_checks_version")
        for column in ("rescore_of", "protocol", "checks_version"):
            table.drop_column(column)
