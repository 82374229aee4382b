"""Alembic migrations of the results store, shipped in the package: `store.migrate` runs them on open, no
alembic.ini needed. One revision per schema change; `python -m store.migrations revision -m "what changed"` writes the
next one."""
