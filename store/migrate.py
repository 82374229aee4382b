"""Schema versions: every open brings the database to this release's head revision (store/migrations/), inside one
transaction that holds the write lock, so a store made by any earlier release upgrades in place with its rows and
two processes opening it at once upgrade it once. A database whose revision this release does not know was written
by a newer kernelwright: that is a StoreError that says to upgrade, never a half-read store.

A new database is created by the same revisions as an old one is upgraded by (not by `create_all` and a stamp):
there is one way a schema comes to be, every test that opens a fresh store runs it, and
tests/store/test_migrations.py checks that it ends equal to store.models.

New revision (after changing store/models.py): `python -m store.migrations revision -m "what changed"` writes
store/migrations/versions/<id>_<slug>.py with the differences it finds; read it and fix it before committing."""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, text

MIGRATIONS = Path(__file__).parent / "migrations"
UPGRADE_HINT = "upgrade kernelwright (pip install -U kernelwright) to open it"
_PG_LOCK = 0x6B776462  # pg_advisory_xact_lock key: one upgrade at a time per PostgreSQL database


class NewerSchemaError(Exception):
    """The database carries a revision this release does not know: a newer kernelwright wrote it."""

    def __init__(self, revisions: list[str]) -> None:
        super().__init__(f"it was written by a newer kernelwright (schema revision {', '.join(revisions)}; this "
                         f"release knows up to {head_revision()}): {UPGRADE_HINT}")


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's settings without an alembic.ini: the scripts are found in the installed package."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    head = _scripts().get_current_head()
    assert head is not None, "store/migrations/versions holds no revision"
    return head


def known_revisions() -> set[str]:
    return {script.revision for script in _scripts().walk_revisions()}


def current_revisions(connection: Connection) -> list[str]:
    """The revisions the database is stamped with (none for a new database or one made before versions)."""
    return list(MigrationContext.configure(connection).get_current_heads())


def upgrade_to_head(engine: Engine) -> None:
    """Bring the database to head in one transaction (SQLite: BEGIN IMMEDIATE, from store.db; PostgreSQL: an
    advisory lock); nothing to do when it is there already. NewerSchemaError when it is past this release."""
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK})
        current = current_revisions(connection)
        unknown = sorted(set(current) - known_revisions())
        if unknown:
            raise NewerSchemaError(unknown)
        if current != [head_revision()]:
            command.upgrade(alembic_config(connection), "head")


def new_revision(message: str) -> None:
    """Write the next revision: the differences between store.models and a database migrated to head."""
    with tempfile.TemporaryDirectory() as folder:
        engine = create_engine(f"sqlite:///{Path(folder) / 'head.db'}")
        upgrade_to_head(engine)
        with engine.begin() as connection:
            command.revision(alembic_config(connection), message=message, autogenerate=True,
                             rev_id=f"{int(head_revision()) + 1:04d}")
        engine.dispose()

