"""The same store on PostgreSQL: a throwaway server on 127.0.0.1 (skipped where PostgreSQL or psycopg is not
installed). It caught a real difference: SELECT DISTINCT over JSON columns fails on PostgreSQL."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from harness.records import Verdict
from kernelbench.bundled import find_bundled
from kernelwright.gate_service import _stored_candidates
from store import open_store, record_evaluation
from store.browse import best_for_problem
from store.results import load_evaluation
from store.runs import create_run
from tests.store.test_store import _evaluation


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    pytest.importorskip("psycopg")
    if not (shutil.which("initdb") and shutil.which("pg_ctl")):
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not installed")
    folder = Path(tempfile.mkdtemp(prefix="kw-pg-", dir="/tmp"))
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user to run the server")
        os.chown(folder, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port, data = _free_port(), folder / "data"
    subprocess.run([*prefix, "initdb", "-D", str(data), "-A", "trust", "-U", "kw"], check=True, capture_output=True)
    subprocess.run([*prefix, "pg_ctl", "-D", str(data), "-w", "-l", str(folder / "log"), "-o",
                    f"-h 127.0.0.1 -p {port} -k {folder}", "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://kw@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, "pg_ctl", "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def test_store_round_trip_and_queries_on_postgres(postgres_url: str) -> None:
    sessions = open_store(postgres_url)
    relu = find_bundled("relu")
    run_id = create_run(sessions, "eval", None, {"note": "pg"})
    accepted = record_evaluation(sessions, relu, "source a", _evaluation(), run_id=run_id)
    record_evaluation(sessions, relu, "source b", _evaluation(Verdict.INCORRECT, candidate_hash="h2"), run_id=run_id)
    assert load_evaluation(sessions, accepted) == _evaluation()
    assert [row.source for row in _stored_candidates(postgres_url, None, None)] == ["source a"]  # JSON-safe query
    assert best_for_problem(sessions, "ReLU")[0]["speedup"] == 1.5


def test_a_postgres_store_is_at_head_and_opens_again(postgres_url: str) -> None:
    from sqlalchemy import create_engine, text

    from store.migrate import head_revision

    open_store(postgres_url)
    open_store(postgres_url)  # at head already: nothing to do
    engine = create_engine(postgres_url)
    with engine.connect() as connection:
        assert list(connection.execute(text("SELECT version_num FROM alembic_version")).scalars()) == [head_revision()]
    engine.dispose()
