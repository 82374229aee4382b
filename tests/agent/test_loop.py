"""The whole loop against the scripted model on the CPU device: repair, best-of, dedup, artifacts, store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from agent.config import OptimizeConfig
from agent.llm import LLMError
from agent.scripted import ScriptedModel
from harness import EvalPolicy
from kernelwright.optimize_service import ModelOptions, run_optimize
from store import CandidateRow, EvaluationRow, LLMCallRow, open_store
from tests.agent.scripts import JUDGE, relu_repair_script
from tests.conftest import RELU_CANDIDATE

pytestmark = pytest.mark.slow


def test_scripted_run_repairs_then_keeps_the_best(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'loop.db'}"
    config = OptimizeConfig(device="cpu", rounds=3, patience=5, policy=EvalPolicy(timing_budget_s=0.2))
    models = ModelOptions(model=f"scripted:{relu_repair_script(tmp_path)}")
    summary = run_optimize("relu", config, models, db)
    assert summary["status"] == "finished" and summary["llm_calls"] == 5
    assert summary["best"]["verdict"] == "accepted" and summary["best"]["round"] == 2
    folder = Path(summary["folder"])
    assert (folder / "best.py").read_text() == RELU_CANDIDATE.read_text()
    assert "| 1 | 1 | incorrect |" in (folder / "report.md").read_text()
    assert len((folder / "transcript.jsonl").read_text().splitlines()) == 5
    with open_store(db)() as session:
        calls = {(c.round, c.purpose): c for c in session.scalars(select(LLMCallRow))}
        # the judge of round 2 read the failure; the coder of round 2 got the judge's change
        assert "verdict: incorrect" in calls[(1, "judge")].messages[-1]["content"]
        assert JUDGE["change"] in calls[(1, "coder")].messages[-1]["content"]
        # round 3's coder saw the accepted kernel as a contrastive exemplar
        assert "Earlier accepted kernels" in calls[(2, "coder")].messages[-1]["content"]
        # the identical round-3 candidate was not evaluated again
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 2
        assert session.scalar(select(func.count()).select_from(CandidateRow)) == 2


def test_unparseable_reply_and_exhausted_script_are_failed_attempts_not_crashes(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"replies": [{"purpose": "coder", "content": "I refuse."}]}))
    config = OptimizeConfig(device="cpu", rounds=2, policy=EvalPolicy(timing_budget_s=0.2))
    summary = run_optimize("relu", config, ModelOptions(model=f"scripted:{script}"), f"sqlite:///{tmp_path / 'b.db'}")
    assert summary["best"] is None and summary["status"] == "finished"
    report = (Path(summary["folder"]) / "report.md").read_text()
    assert "unparseable" in report and "llm_error" in report


def test_scripted_model_matches_replies_to_the_problem(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [{"purpose": "coder", "problem": "GELU", "content": "gelu"},
                                              {"purpose": "coder", "problem": "ReLU", "content": "relu"}]}))
    model = ScriptedModel(script)
    assert model.complete([{"role": "user", "content": "class ReLU"}], purpose="coder").content == "relu"
    with pytest.raises(LLMError):
        model.complete([{"role": "user", "content": "class ReLU"}], purpose="coder")
