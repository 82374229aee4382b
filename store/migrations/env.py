"""Alembic's entry point: it runs the revisions on the connection `store.migrate` hands over (its transaction,
its lock), so an upgrade is all or nothing."""

from __future__ import annotations

from alembic import context

from store.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("store migrations run through store.migrate (it passes the connection), not the alembic CLI")
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True,
                  compare_type=True)
with context.begin_transaction():
    context.run_migrations()
