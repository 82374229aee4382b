"""KernelBench sizes on the CPU: `problems shrink --write` keeps the shrunk files, `optimize --shrink` works like
eval's, and a problem too large for this machine is a one-line error that points to --shrink."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbench.problem import load_problem
from store import open_store
from store.browse import run_evaluations
from tests.agent.scripts import relu_repair_script
from tests.conftest import HUGE_ELEMENTWISE, RELU_CANDIDATE

KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")
ENORMOUS = HUGE_ELEMENTWISE.replace("batch_size = 4096", "batch_size = 4096 * 4096")  # 96 TiB per tensor


def _run(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KERNELWRIGHT_HOME": str(tmp_path / "home")}
    return subprocess.run([KERNELWRIGHT, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _problem(tmp_path: Path, source: str = HUGE_ELEMENTWISE) -> Path:
    path = tmp_path / "src" / "level1" / "19_ReLU.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def test_problems_shrink_writes_marked_files_in_the_same_layout(tmp_path: Path) -> None:
    _problem(tmp_path)
    result = _run(tmp_path, "problems", "shrink", str(tmp_path / "src"), "--write", str(tmp_path / "cpu"), "--json")
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    written = load_problem(row["written"])
    assert Path(row["written"]) == tmp_path / "cpu" / "level1" / "19_ReLU.py"
    assert written.key == "level1/19_ReLU" and written.shrunk == row["changes"] and "dim 393216->" in row["changes"]
    assert written.label.startswith("level1/19_ReLU (shrunk: ")


def test_problems_shrink_never_writes_over_the_originals(tmp_path: Path) -> None:
    original = _problem(tmp_path)
    result = _run(tmp_path, "problems", "shrink", str(tmp_path / "src"), "--write", str(tmp_path / "src"))
    assert result.returncode == 2 and "would overwrite the original" in result.stderr
    assert original.read_text() == HUGE_ELEMENTWISE


@pytest.mark.parametrize("command", ["eval", "optimize"])
def test_a_problem_too_large_for_memory_points_to_shrink(tmp_path: Path, command: str) -> None:
    problem = str(_problem(tmp_path, ENORMOUS))
    args = [problem, str(RELU_CANDIDATE)] if command == "eval" else [problem, "--model", "scripted:x.json"]
    result = _run(tmp_path, command, *args, "--device", "cpu", "--db", f"sqlite:///{tmp_path / 's.db'}")
    message = " ".join(result.stderr.split())
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "GiB free): add --shrink" in message and len(result.stderr.strip().splitlines()) == 1


def test_a_problem_over_the_candidates_memory_limit_points_to_shrink(tmp_path: Path) -> None:
    """12 GiB of tensors fit a large machine's memory but never the candidate's 8 GiB limit."""
    problem = str(_problem(tmp_path))
    result = _run(tmp_path, "eval", problem, str(RELU_CANDIDATE), "--device", "cpu", "--no-store")
    message = " ".join(result.stderr.split())
    assert result.returncode == 2 and "needs 12.0 GiB" in message and "add --shrink" in message


@pytest.mark.slow
def test_optimize_with_shrink_runs_a_kernelbench_sized_problem_and_marks_it(tmp_path: Path) -> None:
    problem = _problem(tmp_path)
    db = f"sqlite:///{tmp_path / 'opt.db'}"
    # after the loop: the envelope and the op's shape buckets, 6-11 evaluations at 64 MiB (past 600 s once on a
    # loaded 2-core machine): a short timing budget, and the time they need
    result = _run(tmp_path, "optimize", str(problem), "--device", "cpu", "--shrink", "--rounds", "2",
                  "--model", f"scripted:{relu_repair_script(tmp_path)}", "--db", db, "--json",
                  "--timing-budget", "0.05", timeout=1500)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert "size reduction: batch_size 4096->" in result.stderr and "dim 393216->" in summary["shrunk"]
    assert summary["best"] is not None
    evaluations = run_evaluations(open_store(db), summary["run_id"])
    assert evaluations and all(e["shrunk"] == summary["shrunk"] for e in evaluations)


def test_a_sweep_stores_shrink_and_device_and_marks_its_problems(tmp_path: Path) -> None:
    from store import RunRow

    _problem(tmp_path)
    (tmp_path / "solutions").mkdir()  # no solution: the problem is recorded as missing, nothing is built
    db = f"sqlite:///{tmp_path / 'sweep.db'}"
    result = _run(tmp_path, "sweep", str(tmp_path / "src"), "--solutions", str(tmp_path / "solutions"), "--shrink",
                  "--device", "cpu", "--db", db, "--json")
    assert result.returncode == 0, result.stderr
    (problem,) = json.loads(result.stdout)["problems"]
    assert problem["verdict"] == "missing" and "dim 393216->" in problem["shrunk"]
    with open_store(db)() as session:
        config = session.query(RunRow).one().config["sweep"]
    assert config["shrink"] is True and config["device"] == "cpu" and config["device_requested"] == "cpu"
    assert config["device_name"]


def test_a_sweep_over_problems_too_large_for_the_cpu_points_to_shrink(tmp_path: Path) -> None:
    _problem(tmp_path)
    (tmp_path / "solutions").mkdir()
    result = _run(tmp_path, "sweep", str(tmp_path / "src"), "--solutions", str(tmp_path / "solutions"),
                  "--device", "cpu", "--db", f"sqlite:///{tmp_path / 'w.db'}")
    message = " ".join(result.stderr.split())
    assert result.returncode == 2 and "1 of 1 problems cannot be allocated here" in message
    assert "add --shrink" in message and "Traceback" not in result.stderr


def test_a_gate_of_solutions_too_large_for_the_cpu_points_to_shrink(tmp_path: Path) -> None:
    _problem(tmp_path)
    solution = tmp_path / "solutions" / "level1" / "19_ReLU.py"
    solution.parent.mkdir(parents=True)
    solution.write_text(RELU_CANDIDATE.read_text())
    result = _run(tmp_path, "gate", "--solutions", str(tmp_path / "solutions"), "--problems-dir",
                  str(tmp_path / "src"), "--device", "cpu", "--no-store")
    message = " ".join(result.stderr.split())
    assert result.returncode == 2 and "1 of 1 problems cannot be allocated here" in message
    assert "add --shrink" in message
