"""One store, found the same way by every command wherever it runs: `KERNELWRIGHT_HOME`, else the per-user data
folder, never the current folder. A command that only reads never makes a store; it says where it looked. Results
left by an earlier release in a `runs/` folder are pointed out, never silently dropped. (The suite moves the
per-user folder under a temporary XDG_DATA_HOME: tests/conftest.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.paths import build_cache_dir, default_home, home
from kernelwright.settings import settle_home
from store import default_url, open_store
from store.runs import create_run

KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")
READING = (("runs", "list"), ("runs", "show", "x"), ("runs", "best", "relu"), ("runs", "compare", "a", "b"),
           ("report", "x"), ("export", "out.jsonl"), ("gate", "--device", "cpu"), ("rerun", "x"))


def _run(cwd: Path, data: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI in `cwd`, with `data` as the per-user data folder's parent and no home or store set."""
    base = {k: v for k, v in os.environ.items() if k not in ("KERNELWRIGHT_HOME", "KERNELWRIGHT_DB")}
    return subprocess.run([KERNELWRIGHT, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**base, "XDG_DATA_HOME": str(data), **env})


def _store_with_a_run(folder: Path) -> str:
    sessions = open_store(f"sqlite:///{folder / 'kernelwright.db'}")
    return create_run(sessions, "optimize", "scripted", {"problem": {"key": "level1/1_ReLU"}})


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    cwd, data = tmp_path / "project", tmp_path / "data"
    cwd.mkdir()
    return cwd, data


def test_the_home_is_the_variable_else_the_per_user_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(tmp_path / "mine"))
    monkeypatch.delenv("KERNELWRIGHT_BUILD_CACHE")
    assert home() == tmp_path / "mine" and build_cache_dir() == (tmp_path / "mine" / "builds").resolve()
    assert default_url() == f"sqlite:///{tmp_path / 'mine' / 'kernelwright.db'}"
    monkeypatch.delenv("KERNELWRIGHT_HOME")
    assert home() == default_home() == tmp_path / "data" / "kernelwright"
    assert default_url() == f"sqlite:///{tmp_path / 'data' / 'kernelwright' / 'kernelwright.db'}"
    monkeypatch.setenv("KERNELWRIGHT_DB", "sqlite:///elsewhere.db")
    assert default_url() == "sqlite:///elsewhere.db"


def test_a_command_settles_one_absolute_home_for_everything_it_starts(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNELWRIGHT_HOME", "relative")
    assert settle_home() == (tmp_path / "relative", None)
    assert os.environ["KERNELWRIGHT_HOME"] == str(tmp_path / "relative")
    monkeypatch.delenv("KERNELWRIGHT_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert settle_home() == (tmp_path / "data" / "kernelwright", None)
    assert not (tmp_path / "data").exists()  # settling creates nothing


def test_reading_commands_never_create_a_store_and_say_where_they_looked(tmp_path: Path) -> None:
    cwd, data = _folders(tmp_path)
    looked = data / "kernelwright" / "kernelwright.db"
    for args in READING:
        result = _run(cwd, data, *args)
        message = " ".join(result.stderr.split())
        assert result.returncode == 2 and "Traceback" not in result.stderr, (args, result.stderr)
        assert f"no results store at {looked}" in message, args
        assert "--db" in message and "KERNELWRIGHT_HOME" in message
    assert list(cwd.iterdir()) == [] and not data.exists()  # no runs/, no kernelwright.db, no home


def test_a_missing_db_file_is_named_and_not_created(tmp_path: Path) -> None:
    cwd, data = _folders(tmp_path)
    missing = tmp_path / "elsewhere" / "kernelwright.db"
    result = _run(cwd, data, "runs", "list", "--db", f"sqlite:///{missing}")
    assert result.returncode == 2 and f"no results store at {missing}" in " ".join(result.stderr.split())
    assert not missing.parent.exists()


def test_the_per_user_store_is_found_from_any_folder(tmp_path: Path) -> None:
    cwd, data = _folders(tmp_path)
    (data / "kernelwright").mkdir(parents=True)
    run_id = _store_with_a_run(data / "kernelwright")
    for where in (cwd, tmp_path):
        result = _run(where, data, "runs", "list", "--json")
        assert result.returncode == 0 and [r["run_id"] for r in json.loads(result.stdout)] == [run_id]
    assert list(cwd.iterdir()) == []


def test_a_recording_command_writes_to_the_per_user_folder_not_the_current_one(tmp_path: Path) -> None:
    """optimize with an endpoint that refuses connections: the run is recorded (failed) in seconds."""
    cwd, data = _folders(tmp_path)
    result = _run(cwd, data, "optimize", "relu", "--device", "cpu", "--base-url", "http://127.0.0.1:9/v1",
                  "--api-key-env", "LOCAL_KEY", "--rounds", "1", "--json", LOCAL_KEY="local-secret")
    assert result.returncode == 1 and json.loads(result.stdout)["status"] == "failed", result.stderr
    store = data / "kernelwright" / "kernelwright.db"
    assert store.is_file() and f"store {store}" in result.stderr
    assert list(cwd.iterdir()) == []


def test_results_of_an_earlier_release_in_runs_are_pointed_out_and_stay_usable(tmp_path: Path) -> None:
    cwd, data = _folders(tmp_path)
    (cwd / "runs").mkdir()
    old_run = _store_with_a_run(cwd / "runs")
    deeper = cwd / "src"
    deeper.mkdir()
    for where in (cwd, deeper):  # as the earlier release found it: ./runs or the nearest one above
        result = _run(where, data, "runs", "list")
        notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
        assert notes == [f"note: results are now stored in {data / 'kernelwright'}, not in {cwd / 'runs'}; to keep "
                         f"using {cwd / 'runs'}, set KERNELWRIGHT_HOME={cwd / 'runs'}"], result.stderr
    kept = _run(deeper, data, "runs", "list", "--json", KERNELWRIGHT_HOME=str(cwd / "runs"))
    assert kept.returncode == 0 and "note:" not in kept.stderr
    assert [r["run_id"] for r in json.loads(kept.stdout)] == [old_run]
    assert not data.exists()
