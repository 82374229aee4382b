"""Schema versions: a store written by fe781af (the last release without them, tests/store/fixtures/fe781af.db: two
optimize runs and a sweep of Max_reduction with the scripted model, baselines, an eval of a rejected candidate)
opens in this release with its runs listed, and takes new ones; a new store is at head and equal to store.models; a
store from a newer release is a one-line error that says to upgrade."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine
from typer.testing import CliRunner

from harness.records import Verdict
from kernelbench.bundled import find_bundled
from kernelwright.runs_service import runs_list
from store import open_store, record_evaluation
from store.db import StoreError
from store.migrate import head_revision
from store.models import Base
from store.runs import create_run
from tests.store.test_store import _evaluation

FIXTURE = Path(__file__).parent / "fixtures" / "fe781af.db"
FIXTURE_RUNS = [("20261125-193808-b841c7", "optimize"), ("20261125-193808-dfe477", "sweep"),
                ("20261125-193800-a7640f", "optimize")]  # newest first, as `runs list` shows them
FIXTURE_ROWS = {"problems": 1, "runs": 3, "candidates": 3, "evaluations": 3, "llm_calls": 2, "sweep_items": 1,
                "baselines": 1}


def _copy(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "kernelwright.db"
    shutil.copyfile(FIXTURE, path)
    return path, f"sqlite:///{path}"


def _rows(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        return {table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in FIXTURE_ROWS}


def _revision(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT version_num FROM alembic_version")]


def _schema_differences(url: str) -> list[object]:
    engine = create_engine(url)
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection, opts={"compare_type": True}),
                                       Base.metadata)
    engine.dispose()
    return differences


def test_a_fe781af_store_upgrades_in_place_with_its_runs_listed(tmp_path: Path) -> None:
    path, url = _copy(tmp_path)
    assert _rows(path) == FIXTURE_ROWS
    runs = runs_list(url)  # what `kernelwright runs list` shows
    assert [(run["run_id"], run["kind"]) for run in runs] == FIXTURE_RUNS
    assert {run["model"] for run in runs} == {"scripted:demo_max_reduction.json"}
    assert {run["status"] for run in runs} == {"finished"}
    assert [run["problems"] for run in runs] == [1, 1, 1]
    assert all(run["best_speedup"] and run["best_speedup"] > 1.0 for run in runs)
    assert [run["llm_calls"] for run in runs] == [1, 1, 1]  # the sweep's: the call of the optimize run it started
    assert _revision(path) == [head_revision()]
    assert _rows(path) == FIXTURE_ROWS
    assert _schema_differences(url) == []


def test_an_upgraded_fe781af_store_takes_a_new_run(tmp_path: Path) -> None:
    path, url = _copy(tmp_path)
    sessions = open_store(url, create=False)
    run_id = create_run(sessions, "eval", None, {"note": "after the upgrade"})
    record_evaluation(sessions, find_bundled("relu"), "source", _evaluation(Verdict.ACCEPTED), run_id=run_id)
    runs = runs_list(url)
    assert runs[0]["run_id"] == run_id and runs[0]["best_speedup"] == 1.5
    assert [(run["run_id"], run["kind"]) for run in runs[1:]] == FIXTURE_RUNS
    assert _rows(path) == {**FIXTURE_ROWS, "problems": 2, "runs": 4, "candidates": 4, "evaluations": 4}


def test_a_store_from_before_fe781af_gains_what_it_lacked(tmp_path: Path) -> None:
    """As 7267ff1 made it: no llm_calls, sweep_items or baselines, no candidates.slot."""
    path, url = _copy(tmp_path)
    with sqlite3.connect(path) as db:
        for table in ("sweep_items", "baselines", "llm_calls"):
            db.execute(f"DROP TABLE {table}")
        db.execute("ALTER TABLE candidates DROP COLUMN slot")
    runs = runs_list(url)
    assert [(run["run_id"], run["kind"]) for run in runs] == FIXTURE_RUNS
    assert _rows(path) == {**FIXTURE_ROWS, "llm_calls": 0, "sweep_items": 0, "baselines": 0}
    assert _schema_differences(url) == []


def test_a_new_store_is_at_head_and_equal_to_the_models(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    open_store(f"sqlite:///{path}")
    assert _revision(path) == [head_revision()]
    assert _schema_differences(f"sqlite:///{path}") == []
    open_store(f"sqlite:///{path}")  # at head: nothing to do
    assert _revision(path) == [head_revision()]


def test_processes_opening_a_new_store_at_once_create_it_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            open_store(url)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert _revision(tmp_path / "new.db") == [head_revision()]


def test_a_store_from_a_newer_release_says_to_upgrade(tmp_path: Path) -> None:
    path, url = _copy(tmp_path)
    open_store(url)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError, match="newer kernelwright") as raised:
        open_store(url, create=False)
    message = str(raised.value)
    assert "\n" not in message and "upgrade kernelwright" in message and "9999" in message
    assert _revision(path) == ["9999"] and _rows(path) == FIXTURE_ROWS  # left as it was


def test_the_cli_reports_a_newer_store_in_one_line(tmp_path: Path) -> None:
    from kernelwright.cli import app

    path, url = _copy(tmp_path)
    open_store(url)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE alembic_version SET version_num = '9999'")
    result = CliRunner().invoke(app, ["runs", "list", "--db", url])
    assert result.exit_code == 2
    assert "upgrade kernelwright" in result.output and "Traceback" not in result.output


def test_an_upgraded_store_marks_its_old_evaluations_unversioned(tmp_path: Path) -> None:
    """Revision 0003: every row judged before the checks had a version says so; new rows carry theirs."""
    path, url = _copy(tmp_path)
    sessions = open_store(url, create=False)
    with sqlite3.connect(path) as db:
        old = db.execute("SELECT checks_version, protocol, rescore_of, verdict FROM evaluations").fetchall()
    assert [row[:3] for row in old] == [("unversioned", None, None)] * FIXTURE_ROWS["evaluations"]
    assert sorted(row[3] for row in old) == ["accepted", "accepted", "rejected"]  # verdicts kept
    evaluation = _evaluation(Verdict.ACCEPTED)
    evaluation.checks_version = "checks-000000000001"
    evaluation.isolation["protocol"] = "parent-driven"
    record_evaluation(sessions, find_bundled("relu"), "source", evaluation)
    with sqlite3.connect(path) as db:
        new = db.execute("SELECT checks_version, protocol FROM evaluations ORDER BY id DESC LIMIT 1").fetchone()
    assert new == ("checks-000000000001", "parent-driven")


def test_revision_0003_reads_the_protocol_an_old_record_wrote(tmp_path: Path) -> None:
    """A timed evaluation stored before 0003 kept its protocol path in its record only: the upgrade copies it."""
    import json

    path, url = _copy(tmp_path)
    with sqlite3.connect(path) as db:
        record = json.loads(db.execute("SELECT record FROM evaluations WHERE id = 1").fetchone()[0])
        record.setdefault("isolation", {})["protocol"] = "parent-driven"
        db.execute("UPDATE evaluations SET record = ? WHERE id = 1", (json.dumps(record),))
    open_store(url, create=False)
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, protocol, checks_version FROM evaluations ORDER BY id").fetchall()
    assert rows == [(1, "parent-driven", "unversioned"), (2, None, "unversioned"), (3, None, "unversioned")]
