"""Sweeps on the CPU device with the bundled problems: candidates mode, optimize mode with the scripted model,
a SIGKILL in the middle and a resume, and the report."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from store import EvaluationRow, RunRow, SweepItemRow, open_store
from tests.agent.scripts import relu_repair_script
from tests.conftest import BUNDLED, CPU_CANDIDATES

pytestmark = pytest.mark.slow
KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")
PROBLEMS = BUNDLED / "problems"


def _run(args: list[str], tmp_path: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KERNELWRIGHT_HOME": str(tmp_path / "home")}
    return subprocess.run([KERNELWRIGHT, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _solutions(tmp_path: Path, names: list[str]) -> Path:
    folder = tmp_path / "solutions"
    for name in names:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CPU_CANDIDATES / name, target)
    return folder


def test_candidates_sweep_counts_every_problem_and_reports(tmp_path: Path) -> None:
    solutions = _solutions(tmp_path, ["level1/1_ReLU.py", "level1/4_Softmax.py"])
    shutil.copy(CPU_CANDIDATES / "level1/1_ReLU.py", solutions / "level1" / "2_GELU.py")  # wrong kernel for GELU
    db = f"sqlite:///{tmp_path / 'sweep.db'}"
    result = _run(["sweep", str(PROBLEMS), "--solutions", str(solutions), "--device", "cpu", "--limit", "5",
                   "--db", db, "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    verdicts = {p["name"]: p["verdict"] for p in summary["problems"]}
    assert verdicts == {"level1/1_ReLU": "accepted", "level1/2_GELU": "incorrect", "level1/4_Softmax": "accepted",
                        "level1/3_Sum_reduction_over_a_dimension": "missing",
                        "level1/5_LayerNorm": "missing"}
    assert summary["metrics"]["all"]["failures"] == {"incorrect": 1, "missing": 2}
    assert summary["metrics"]["all"]["fast_p"]["0"] == pytest.approx(0.4)
    assert "ETA" in result.stderr  # live progress
    listed = json.loads(_run(["runs", "list", "--db", db, "--json"], tmp_path).stdout)
    assert [r["run_id"] for r in listed] == [summary["run_id"]]
    best = json.loads(_run(["runs", "best", "ReLU", "--db", db, "--json"], tmp_path).stdout)
    assert best[0]["problem"] == "ReLU" and best[0]["speedup"] > 0
    compared = json.loads(_run(["runs", "compare", summary["run_id"], summary["run_id"], "--db", db, "--json"],
                               tmp_path).stdout)
    assert {r["problem"]: r["b_over_a"] for r in compared}["level1/1_ReLU"] == pytest.approx(1.0)
    shown = json.loads(_run(["runs", "show", summary["run_id"], "--db", db, "--json"], tmp_path).stdout)
    assert shown["kind"] == "sweep" and len(shown["problems"]) == 5
    report = _run(["report", summary["run_id"], "--db", db], tmp_path)
    page = Path(report.stdout.strip()).read_text()
    assert "<svg" in page and "fast_p" in page and "level1/2_GELU" in page and 'href="kernels/level1_1_ReLU.py"' in page
    assert (Path(report.stdout.strip()).parent / "kernels" / "level1_1_ReLU.py").is_file()


def test_sweep_killed_midway_resumes_with_every_problem_recorded_once(tmp_path: Path) -> None:
    names = ["level1/1_ReLU.py", "level1/4_Softmax.py", "level1/9_Max_reduction_over_a_dimension.py",
             "level1/8_MSELoss.py"]
    solutions = _solutions(tmp_path, names)
    db = f"sqlite:///{tmp_path / 'kill.db'}"
    env = {**os.environ, "KERNELWRIGHT_HOME": str(tmp_path / "home")}
    command = [KERNELWRIGHT, "sweep", str(PROBLEMS), "--solutions", str(solutions), "--device", "cpu",
               "--problems", "ReLU", "--problems", "4", "--problems", "Max_reduction*", "--problems", "level1/8_MSELoss",
               "--workers", "1", "--db", db, "--json"]
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline:
        if (tmp_path / "kill.db").exists():
            with open_store(db)() as session:
                if session.scalar(select(func.count()).select_from(SweepItemRow).where(SweepItemRow.status == "done")):
                    break
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    with open_store(db)() as session:
        run_id = session.scalar(select(SweepItemRow.run_id))
        done_before = session.scalar(select(func.count()).select_from(SweepItemRow).where(SweepItemRow.status == "done"))
    assert 1 <= done_before < 4
    resumed = _run(["sweep", "--resume", run_id, "--db", db, "--json"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert sorted(p["name"] for p in summary["problems"]) == sorted(f"level1/{n[7:-3]}" for n in names)
    assert all(p["status"] == "done" and p["verdict"] == "accepted" for p in summary["problems"])
    with open_store(db)() as session:
        assert session.scalar(select(func.count()).select_from(SweepItemRow)) == 4
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 4  # finished work not redone


@pytest.mark.timing
def test_ctrl_c_stops_a_sweep_at_once_and_it_resumes_alone(tmp_path: Path) -> None:
    solutions = _solutions(tmp_path, ["level1/1_ReLU.py", "level1/4_Softmax.py"])
    db = f"sqlite:///{tmp_path / 'int.db'}"
    env = {**os.environ, "KERNELWRIGHT_HOME": str(tmp_path / "home")}
    sweep = subprocess.Popen([KERNELWRIGHT, "sweep", str(PROBLEMS), "--solutions", str(solutions), "--device", "cpu",
                              "--problem", "ReLU", "--problem", "Softmax", "--db", db], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((tmp_path / "home" / "scratch").glob("eval-*")):
        time.sleep(0.1)  # an evaluation is under way
    os.killpg(sweep.pid, signal.SIGINT)
    started = time.time()
    _, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 130 and time.time() - started < 10, stderr
    with open_store(db)() as session:
        run_id = session.scalar(select(SweepItemRow.run_id))
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 0  # nothing cut short recorded
        assert session.get(RunRow, run_id).status == "interrupted"
    command = f"kernelwright sweep --resume {run_id} --db {db}"
    assert command in " ".join(stderr.split())
    resumed = _run([*command.split()[1:], "--json"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [p["verdict"] for p in json.loads(resumed.stdout)["problems"]] == ["accepted", "accepted"]


def test_optimize_sweep_with_the_scripted_model(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'opt.db'}"
    script = relu_repair_script(tmp_path)
    result = _run(["sweep", str(PROBLEMS), "--problems", "ReLU", "--device", "cpu", "--model", f"scripted:{script}",
                   "--rounds", "2", "--db", db, "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["verdict"] == "accepted" and problem["child_run_id"]
    assert problem["ref_ms"] > 0 and problem["speedup_ci"]  # the best kernel's timings reach the sweep's report
    shown = json.loads(_run(["runs", "show", problem["child_run_id"], "--db", db, "--json"], tmp_path).stdout)
    assert [e["verdict"] for e in shown["evaluations"]] == ["incorrect", "accepted"]


def test_optimize_sweep_evaluates_on_a_local_ray_cluster(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    db = f"sqlite:///{tmp_path / 'ray.db'}"
    script = relu_repair_script(tmp_path)
    result = _run(["sweep", str(PROBLEMS), "--problem", "ReLU", "--device", "cpu", "--model", f"scripted:{script}",
                   "--rounds", "2", "--executor", "ray", "--workers", "2", "--db", db, "--json"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["verdict"] == "accepted"
    with open_store(db)() as session:  # the driver wrote every result, once; each was computed in a Ray task
        records = [row.record for row in session.scalars(select(EvaluationRow))]
    assert [r["verdict"] for r in records] == ["incorrect", "accepted"]
    assert all(r["isolation"]["executor"]["kind"] == "ray" and r["isolation"]["executor"]["node"] for r in records)


def test_baselines_are_measured_once_and_reused(tmp_path: Path) -> None:
    from store import BaselineRow

    solutions = _solutions(tmp_path, ["level1/1_ReLU.py"])
    db = f"sqlite:///{tmp_path / 'base.db'}"
    args = ["sweep", str(PROBLEMS), "--solutions", str(solutions), "--problems", "ReLU", "--device", "cpu",
            "--baselines", "--db", db, "--json"]
    first = _run(args, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    (problem,) = json.loads(first.stdout)["problems"]
    baseline = problem["baseline"]
    assert baseline["eager_ms"] > 0 and (baseline["compile_ms"] or baseline["errors"])
    second = _run(args, tmp_path)
    assert "baselines for" not in second.stderr  # reused, not measured again
    assert "metrics_vs_compile" in json.loads(second.stdout)
    with open_store(db)() as session:
        assert session.scalar(select(func.count()).select_from(BaselineRow)) == 1


def test_problem_globs_are_case_sensitive_and_names_are_not() -> None:
    from kernelbench.bundled import PROBLEMS_ROOT
    from kernelwright.sweep_service import select_problems

    globbed = select_problems(PROBLEMS_ROOT, None, ["*Max*"], None, None, 0, False)
    assert [p.name for p in globbed] == ["Max_reduction_over_a_dimension"]  # not Softmax
    assert [p.name for p in select_problems(PROBLEMS_ROOT, None, ["relu"], None, None, 0, False)] == ["ReLU"]
