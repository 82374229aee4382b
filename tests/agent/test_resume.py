"""Kill `optimize` (SIGKILL, Ctrl-C) in the middle of a run, resume it with `--resume RUN` alone, and check
nothing was paid for or computed twice and nothing finished was lost. The real pipeline, end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from store import CandidateRow, EvaluationRow, LLMCallRow, RunRow, open_store
from tests.agent.scripts import relu_repair_script

pytestmark = pytest.mark.slow
KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")


def _count(db: str, table: type) -> int:
    with open_store(db)() as session:
        return session.scalar(select(func.count()).select_from(table))


def test_killed_run_resumes_without_redoing_finished_work(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'resume.db'}"
    script = relu_repair_script(tmp_path)
    command = [KERNELWRIGHT, "optimize", "relu", "--device", "cpu", "--model", f"scripted:{script}", "--rounds", "3",
               "--sol-target", "0", "--patience", "5", "--db", db, "--json"]
    env = {**os.environ, "KERNELWRIGHT_HOME": str(tmp_path / "home")}
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and (not (tmp_path / "resume.db").exists() or _count(db, EvaluationRow) < 1):
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert _count(db, EvaluationRow) >= 1, "the run was killed before it evaluated anything"
    with open_store(db)() as session:
        run_id = session.scalar(select(RunRow.id))
        calls_before = session.scalar(select(func.count()).select_from(LLMCallRow))
    assert 1 <= calls_before < 5

    # alone: the models, budgets and policy come from the run's stored spec
    resumed = subprocess.run([KERNELWRIGHT, "optimize", "--resume", run_id, "--db", db, "--json"], env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["run_id"] == run_id and summary["best"]["round"] == 2 and summary["status"] == "finished"
    with open_store(db)() as session:
        calls = session.execute(select(LLMCallRow.round, LLMCallRow.purpose, LLMCallRow.slot)).all()
        assert len(calls) == len(set(calls)) == 5  # every LLM call made exactly once across both processes
        per_candidate = session.execute(select(func.count(EvaluationRow.id)).group_by(EvaluationRow.candidate_id)).all()
        assert [n for (n,) in per_candidate] == [1, 1]  # each kernel evaluated exactly once
        assert session.scalar(select(func.count()).select_from(CandidateRow)) == 2
        assert session.get(RunRow, run_id).status == "finished"


@pytest.mark.timing
def test_ctrl_c_stops_at_once_marks_the_run_and_says_how_to_resume(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'interrupt.db'}"
    script = relu_repair_script(tmp_path)
    command = [KERNELWRIGHT, "optimize", "relu", "--device", "cpu", "--model", f"scripted:{script}", "--rounds", "3",
               "--sol-target", "0", "--db", db]
    env = {**os.environ, "KERNELWRIGHT_HOME": str(tmp_path / "home")}
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((tmp_path / "home" / "scratch").glob("eval-*")):
        time.sleep(0.1)  # an evaluation is under way: a child is building or running
    os.killpg(run.pid, signal.SIGINT)  # what the terminal sends the foreground process group on Ctrl-C
    started = time.time()
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 130 and time.time() - started < 10, stderr
    with open_store(db)() as session:
        run_id = session.scalar(select(RunRow.id))
        assert session.get(RunRow, run_id).status == "interrupted"
    command = f"kernelwright optimize --resume {run_id} --db {db}"
    assert command in " ".join(stderr.split())
    resumed = subprocess.run([KERNELWRIGHT, *command.split()[1:], "--json"], env=env, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["run_id"] == run_id and summary["status"] == "finished" and summary["best"]["round"] == 2
