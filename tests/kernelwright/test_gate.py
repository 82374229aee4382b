"""`kernelwright gate` as a CI job would run it: a store with one good and one tampered kernel fails and names
the bad one; a folder of solutions is matched to problems and verified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import update

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from kernelbench.bundled import find_bundled
from store import CandidateRow, open_store, record_evaluation
from tests.conftest import RELU_CANDIDATE, relu_variant

pytestmark = pytest.mark.slow
KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")


def _gate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KERNELWRIGHT, "gate", "--device", "cpu", "--json", *args], capture_output=True,
                          text=True, timeout=900, env=os.environ.copy())


def _store_two_accepted(db: str) -> tuple[int, int]:
    sessions = open_store(db)
    relu = find_bundled("relu")
    ids = []
    for source in (RELU_CANDIDATE.read_text(), relu_variant("y = relu_ext.relu_forward(x)\nreturn y")):
        evaluation = evaluate(relu, source, "cpu", EvalPolicy(timing_budget_s=0.1))
        assert evaluation.accepted, evaluation.reasons
        record_evaluation(sessions, relu, source, evaluation)
    with sessions() as session:
        ids = [row.id for row in session.query(CandidateRow).order_by(CandidateRow.id)]
    return ids[0], ids[1]


def test_gate_passes_a_good_store_and_fails_a_tampered_kernel(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'gate.db'}"
    good, bad = _store_two_accepted(db)
    result = _gate("--db", db)
    assert result.returncode == 0, result.stderr
    assert [r["ok"] for r in json.loads(result.stdout)["results"]] == [True, True]
    with open_store(db).begin() as session:  # someone edits an accepted kernel in place...
        session.execute(update(CandidateRow).where(CandidateRow.id == bad)
                        .values(source=relu_variant("relu_ext.relu_forward(x)\nreturn x.abs()")))
    result = _gate("--db", db)
    assert result.returncode == 1
    rows = {r["kernel"]: r for r in json.loads(result.stdout)["results"]}
    assert rows[f"candidate {good}"]["ok"] and rows[f"candidate {bad}"]["verdict"] == "tampered"
    assert f"candidate {bad}" in result.stderr and "FAILED" in result.stderr


def test_gate_reverifies_with_fresh_seeds_when_the_hash_was_also_updated(tmp_path: Path) -> None:
    """A kernel that is wrong but carries a matching hash still fails: the gate re-runs every check."""
    from harness.pipeline import candidate_hash

    db = f"sqlite:///{tmp_path / 'gate.db'}"
    _, bad = _store_two_accepted(db)
    wrong = relu_variant("relu_ext.relu_forward(x)\nreturn x.abs()")
    with open_store(db).begin() as session:
        session.execute(update(CandidateRow).where(CandidateRow.id == bad)
                        .values(source=wrong, source_hash=candidate_hash(wrong)))
    result = _gate("--db", db)
    assert result.returncode == 1
    failed = [r for r in json.loads(result.stdout)["results"] if not r["ok"]]
    assert [r["verdict"] for r in failed] == ["incorrect"]


def test_gate_over_a_folder_of_solutions(tmp_path: Path) -> None:
    solutions = tmp_path / "solutions" / "level1"
    solutions.mkdir(parents=True)
    (solutions / "1_ReLU.py").write_text(RELU_CANDIDATE.read_text())
    (solutions / "2_GELU.py").write_text(RELU_CANDIDATE.read_text())  # the wrong kernel for GELU
    (solutions / "99_Unknown.py").write_text("x = 1\n")
    result = _gate("--solutions", str(tmp_path / "solutions"))
    assert result.returncode == 1
    verdicts = {Path(r["kernel"]).name: r["verdict"] for r in json.loads(result.stdout)["results"]}
    assert verdicts == {"1_ReLU.py": "accepted", "2_GELU.py": "incorrect", "99_Unknown.py": "unmatched"}


def test_gate_with_nothing_to_verify_is_a_usage_error(tmp_path: Path) -> None:
    open_store(f"sqlite:///{tmp_path / 'empty.db'}")
    result = _gate("--db", f"sqlite:///{tmp_path / 'empty.db'}")
    assert result.returncode == 2 and "nothing to verify" in result.stderr


def test_a_forged_speedup_is_not_reproduced() -> None:
    from types import SimpleNamespace

    from kernelwright.gate_service import speedup_not_reproduced

    measured = SimpleNamespace(verdict="accepted", speedup=1.02, speedup_ci=(0.98, 1.06))
    assert "[speedup]" in speedup_not_reproduced(9.1, measured)  # a row inserted with a better number
    assert speedup_not_reproduced(1.2, measured) is None  # inside the noise band
    assert speedup_not_reproduced(None, measured) is None
    # with the stored interval: disjoint intervals are not reproduced even inside the band, overlapping ones are
    assert "[speedup]" in speedup_not_reproduced(1.2, measured, stored_low=1.12)
    assert speedup_not_reproduced(1.2, measured, stored_low=1.03) is None


def test_gate_of_solutions_keeps_to_problem_shows_and_stores_the_interval(tmp_path: Path) -> None:
    from sqlalchemy import func, select

    from store import EvaluationRow

    solutions = tmp_path / "solutions" / "level1"
    solutions.mkdir(parents=True)
    (solutions / "1_ReLU.py").write_text(RELU_CANDIDATE.read_text())
    (solutions / "2_GELU.py").write_text(RELU_CANDIDATE.read_text())  # would fail: --problem leaves it out
    db = f"sqlite:///{tmp_path / 'gate.db'}"
    result = _gate("--solutions", str(tmp_path / "solutions"), "--problem", "relu", "--db", db)
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)["results"]
    assert row["problem"] == "level1/1_ReLU" and row["ok"] and row["shrunk"] is None
    low, high = row["speedup_ci"]
    assert low <= row["speedup"] <= high and row["evaluation_id"] is not None
    with open_store(db)() as session:
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 1
    # the stored kernel, gated from the store: the table shows the re-measured interval and the stored speedup
    table = subprocess.run([KERNELWRIGHT, "gate", "--device", "cpu", "--db", db], capture_output=True, text=True,
                           timeout=900, env=os.environ.copy())
    assert table.returncode == 0, table.stderr
    assert "speedup (95% interval)" in table.stdout and f"x [" in table.stdout and "stored" in table.stdout
    with open_store(db)() as session:  # the re-measurement is another evaluation of the same candidate
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 2
        assert session.scalar(select(func.count()).select_from(CandidateRow)) == 1


def test_gate_problem_filter_that_matches_no_solution_is_a_usage_error(tmp_path: Path) -> None:
    solutions = tmp_path / "solutions" / "level1"
    solutions.mkdir(parents=True)
    (solutions / "1_ReLU.py").write_text(RELU_CANDIDATE.read_text())
    result = _gate("--solutions", str(tmp_path / "solutions"), "--problem", "softmax", "--no-store")
    assert result.returncode == 2 and "matching --problem 'softmax'" in result.stderr


@pytest.mark.timing
def test_ctrl_c_stops_the_gate_with_one_line_and_exit_130(tmp_path: Path) -> None:
    import signal
    import time

    solutions = tmp_path / "solutions" / "level1"
    solutions.mkdir(parents=True)
    (solutions / "1_ReLU.py").write_text(RELU_CANDIDATE.read_text())
    home = tmp_path / "home"
    gate = subprocess.Popen([KERNELWRIGHT, "gate", "--device", "cpu", "--solutions", str(tmp_path / "solutions"),
                             "--no-store"], env={**os.environ, "KERNELWRIGHT_HOME": str(home)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((home / "scratch").glob("eval-*")):
        time.sleep(0.1)  # an evaluation is under way
    os.killpg(gate.pid, signal.SIGINT)
    started = time.time()
    _, stderr = gate.communicate(timeout=60)
    assert gate.returncode == 130 and time.time() - started < 10, stderr
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("[")]
    assert lines == ["interrupted: the gate verified 0 of 1 kernels (those are stored); it neither passed nor "
                     "failed"], stderr


@pytest.mark.parametrize("args, message", [(("--shrink",), "--shrink applies to --solutions"),
                                           (("--solutions", ".", "--run", "x"), "--run selects stored kernels")])
def test_gate_options_of_the_other_mode_are_usage_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    open_store(f"sqlite:///{tmp_path / 'g.db'}")
    result = _gate(*args, "--db", f"sqlite:///{tmp_path / 'g.db'}")
    assert result.returncode == 2 and message in " ".join(result.stderr.split())
