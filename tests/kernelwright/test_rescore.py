"""`kernelwright rescore`: a kernel an earlier harness accepted is re-judged by today's, the old verdict is kept
beside the new one, exports read the new one, and a kernel today's checks already judged is not judged again.

The exploits are stored as an earlier harness would have stored them: accepted, with a speedup, judged by no
version (rows from before revision 0003). Today's checks reject them; an honest kernel beside them stays accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from harness.decision.version import checks_version
from harness.policy import EvalPolicy
from harness.pipeline import candidate_hash
from harness.records import Verdict
from kernelbench.bundled import find_bundled
from kernelwright.cli import app
from kernelwright.rescore_service import RescoreSelection, rescore_store
from store import EvaluationRow, open_store, record_evaluation
from store.runs import create_run
from tests.conftest import RELU_CANDIDATE, relu_variant
from tests.store.test_store import _evaluation

# Two exploits today's static policy refuses before anything runs (no build, no process): the answer is PyTorch's
# and no kernel is built; the timer is patched so the candidate's clock reads nothing.
TORCH_ONLY = """import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""
PATCHED_TIMER = """import time
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

time.perf_counter = lambda: 0.0

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def _accepted_by_an_earlier_harness(sessions, run_id: str, source: str, version: str | None = None) -> int:
    evaluation = _evaluation(Verdict.ACCEPTED, candidate_hash=candidate_hash(source))
    evaluation.speedup, evaluation.speedup_ci, evaluation.speedup_significant = 1.8, (1.6, 2.0), True
    evaluation.checks_version = version  # None: stored before versions ("unversioned")
    return record_evaluation(sessions, find_bundled("relu"), source, evaluation, run_id=run_id)


def _rescore(url: str, *args: str) -> dict:
    result = CliRunner().invoke(app, ["rescore", "--device", "cpu", "--json", "--db", url, *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_stored_exploits_an_earlier_harness_accepted_are_rejected_and_the_old_rows_kept(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'kw.db'}"
    sessions = open_store(url)
    run_id = create_run(sessions, "optimize", "scripted", {})
    old = {name: _accepted_by_an_earlier_harness(sessions, run_id, source)
           for name, source in (("torch-only", TORCH_ONLY), ("patched-timer", PATCHED_TIMER))}
    current = _accepted_by_an_earlier_harness(sessions, run_id, "# judged today", checks_version(EvalPolicy()))

    report = _rescore(url)
    assert report["checks_version"] == checks_version(EvalPolicy()) and report["skipped_current"] == 1
    assert report["rescored"] == report["changed"] == 2
    by_old = {r["before"]["evaluation_id"]: r for r in report["results"]}
    assert set(by_old) == set(old.values())  # the row today's checks judged was not judged again
    for result in by_old.values():
        assert (result["before"]["verdict"], result["before"]["checks_version"]) == ("accepted", "unversioned")
        assert result["after"]["verdict"] == "rejected" and result["after"]["speedup"] is None
        assert result["after"]["checks_version"] == report["checks_version"] and result["decided_by"]
    assert sum(report["by_check"].values()) == 2
    assert by_old[old["patched-timer"]]["decided_by"] == "monkeypatch"

    with sessions() as session:
        rows = {row.id: row for row in session.scalars(select(EvaluationRow))}
    assert len(rows) == 5 and all(rows[i].verdict == "accepted" for i in (*old.values(), current))  # nothing lost
    for old_id in old.values():
        new = rows[by_old[old_id]["after"]["evaluation_id"]]
        assert (new.rescore_of, new.verdict, new.checks_version) == (old_id, "rejected", report["checks_version"])

    out = tmp_path / "rl.jsonl"
    assert CliRunner().invoke(app, ["export", str(out), "--db", url]).exit_code == 0
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(exported) == 0  # no prompts stored: rl rows need one; the card still counts what was read
    card = json.loads((tmp_path / "rl.jsonl.card.json").read_text())
    assert card["verdicts"] == {"accepted": 1, "rejected": 2}
    assert card["checks_versions"] == {report["checks_version"]: 3}

    again = _rescore(url)  # nothing accepted is left unjudged by today's checks: a finished rescore resumes as done
    assert again["rescored"] == 0 and again["skipped_current"] == 1
    everything = _rescore(url, "--all")
    assert everything["rescored"] == 0 and everything["skipped_current"] == 3


def test_the_selection_narrows_by_version_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'kw.db'}"
    sessions = open_store(url)
    run_id = create_run(sessions, "optimize", "scripted", {})
    _accepted_by_an_earlier_harness(sessions, run_id, TORCH_ONLY, "checks-aaaaaaaaaaaa")
    _accepted_by_an_earlier_harness(sessions, run_id, PATCHED_TIMER, "checks-bbbbbbbbbbbb")
    older = _rescore(url, "--older-than", "checks-bbbbbbbbbbbb")
    assert [r["before"]["checks_version"] for r in older["results"]] == ["checks-aaaaaaaaaaaa"]
    result = CliRunner().invoke(app, ["rescore", "--device", "cpu", "--db", url, "--older-than", "checks-nope"])
    assert result.exit_code == 2 and "checks-bbbbbbbbbbbb" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["rescore", "--device", "cpu", "--db", url, "--run", "nope"])
    assert result.exit_code == 2 and "no run 'nope'" in result.output


@pytest.mark.slow
def test_a_ghost_kernel_an_earlier_harness_accepted_is_rejected_and_the_honest_one_stays(tmp_path: Path) -> None:
    """The second way: an exploit that passes the static policy (it calls its kernel, then answers with PyTorch's
    relu), caught at run time by the knock-out and the share; the honest bundled ReLU beside it stays accepted.
    Both share one build."""
    url = f"sqlite:///{tmp_path / 'kw.db'}"
    sessions = open_store(url)
    run_id = create_run(sessions, "optimize", "scripted", {})
    ghost = relu_variant("relu_ext.relu_forward(x)\nreturn torch.relu(x)")
    ids = {name: _accepted_by_an_earlier_harness(sessions, run_id, source)
           for name, source in (("honest", RELU_CANDIDATE.read_text()), ("ghost", ghost))}
    policy = EvalPolicy(timing_budget_s=0.1, envelope=False)
    report = rescore_store(url, "cpu", policy, RescoreSelection())
    after = {r.before_evaluation_id: r for r in report.results}
    assert after[ids["honest"]].after == "accepted", after[ids["honest"]].reasons
    assert after[ids["ghost"]].after == "rejected" and after[ids["ghost"]].changed
    assert report.by_check == {after[ids["ghost"]].decided_by: 1}
