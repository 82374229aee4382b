"""Engines and sessions. SQLite runs in WAL mode and every transaction takes the write lock up front
(`BEGIN IMMEDIATE`), so concurrent writers queue instead of failing halfway with `database is locked`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker

from harness.paths import home
from store.migrate import NewerSchemaError, upgrade_to_head

BUSY_TIMEOUT_MS = 60_000


class StoreError(ValueError):
    """The database URL or file cannot be used; the message says what to do."""


STORE_FILE = "kernelwright.db"


def default_url() -> str:
    """`--db` beats `KERNELWRIGHT_DB`, which beats `kernelwright.db` in the home (`KERNELWRIGHT_HOME`, else the
    per-user data folder: harness.paths.home)."""
    if os.environ.get("KERNELWRIGHT_DB"):
        return os.environ["KERNELWRIGHT_DB"]
    return f"sqlite:///{home() / STORE_FILE}"


def store_location(url: str | None = None) -> str:
    """Where results go, for people: an absolute path for a SQLite file, otherwise the URL without its
    password."""
    url = url or default_url()
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return str(Path(parsed.database).resolve())
    return parsed.render_as_string(hide_password=True)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # let SQLAlchemy's begin event issue BEGIN itself
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _missing_store(path: Path) -> StoreError:
    return StoreError(f"no results store at {path.resolve()}: nothing has been recorded there. Point to yours with "
                      f"--db sqlite:///PATH/{STORE_FILE}, KERNELWRIGHT_DB=URL or KERNELWRIGHT_HOME=FOLDER (the folder "
                      f"that holds {STORE_FILE})")


def open_store(url: str | None = None, create: bool = True) -> sessionmaker[Session]:
    """Return a session factory for `url` (default: `default_url()`), its schema created or upgraded to this
    release's (store.migrate; a store from a newer release is a StoreError that says to upgrade). With
    `create=False` (commands that only read or continue what is stored) a SQLite file that does not exist is a
    StoreError that says where it looked, instead of a new empty store."""
    url = url or default_url()
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"{url!r} is not a database URL (e.g. sqlite:///results/kernelwright.db or "
                         "postgresql://user@host/db)") from exc
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        if not create and not Path(parsed.database).is_file():
            raise _missing_store(Path(parsed.database))
        try:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder for {parsed.database}: {exc}") from exc
    try:
        engine = create_engine(url)
    except Exception as exc:  # unknown dialect or missing driver
        raise StoreError(f"cannot open database {url!r}: {exc}") from exc
    if parsed.get_backend_name() == "sqlite":
        _configure_sqlite(engine)
    try:
        upgrade_to_head(engine)
    except NewerSchemaError as exc:
        raise StoreError(f"the store at {store_location(url)}: {exc}") from None
    except Exception as exc:
        raise StoreError(f"cannot open database {url!r}: {exc}") from exc
    return sessionmaker(engine, expire_on_commit=False)
