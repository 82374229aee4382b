"""One store, found the same way by every command: a command that only reads never makes an empty store where it
happens to run; it says where it looked and how to point it elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from store import open_store
from store.runs import create_run

KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")


def _run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("KERNELWRIGHT_HOME", "KERNELWRIGHT_DB")}
    return subprocess.run([KERNELWRIGHT, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**base, **env})


def test_reading_commands_never_create_a_store(tmp_path: Path) -> None:
    for args in (("runs", "list"), ("runs", "show", "x"), ("runs", "best", "relu"), ("report", "x"),
                 ("export", "out.jsonl"), ("gate", "--device", "cpu"), ("rerun", "x")):
        result = _run(tmp_path, *args)
        message = " ".join(result.stderr.split())
        assert result.returncode == 2 and "Traceback" not in result.stderr, (args, result.stderr)
        assert f"no results store in runs/ of {tmp_path} or of any folder above it" in message, args
        assert "--db" in message and "KERNELWRIGHT_HOME" in message
    assert list(tmp_path.iterdir()) == []  # no runs/, no kernelwright.db


def test_a_missing_db_file_is_named_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "elsewhere" / "kernelwright.db"
    result = _run(tmp_path, "runs", "list", "--db", f"sqlite:///{missing}")
    assert result.returncode == 2 and f"no results store at {missing}" in " ".join(result.stderr.split())
    assert not missing.parent.exists()


def test_the_nearest_project_store_is_found_from_a_subfolder(tmp_path: Path) -> None:
    sessions = open_store(f"sqlite:///{tmp_path / 'runs' / 'kernelwright.db'}")
    run_id = create_run(sessions, "optimize", "scripted", {"problem": {"key": "level1/1_ReLU"}})
    deeper = tmp_path / "src" / "deeper"
    deeper.mkdir(parents=True)
    result = _run(deeper, "runs", "list", "--json")
    assert result.returncode == 0, result.stderr
    assert [r["run_id"] for r in json.loads(result.stdout)] == [run_id]
    assert not (deeper / "runs").exists()
    shown = _run(deeper, "runs", "show", run_id, "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["run_id"] == run_id
