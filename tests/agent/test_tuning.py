"""The autotuning sub-loop: a kernel's declared TUNE constants expand into variants (distinct sources), screened
without an LLM call; the winner alone is evaluated in full and reported; every variant lands in the store with its
parent; the judge reads the tuning table."""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path

import pytest
from sqlalchemy import select

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from agent.search.tunables import TuneError, tunables, variants
from agent.search.tuning import TuneBudget
from harness.execution.eval_task import EvalTask
from harness.records import Evaluation
from kernelbench.bundled import bundled_tunable, find_bundled
from kernelwright.optimize_service import run_optimize
from store import CandidateRow, EvaluationRow, LLMCallRow, open_store
from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel, judge_reply

TUNED = fake_kernel("accepted 1.0", 'TUNE = {"BLOCK": [32, 64, 128], "UNROLL": [1, 4]}')
SPEED = {32: 1.0, 64: 1.5, 128: 1.2}  # the scripted speed of each BLOCK (UNROLL changes nothing)


class TuningExecutor(ScriptedExecutor):
    """Scripted evaluations whose speed follows the pinned BLOCK, in the tier the task's policy asks for."""

    def submit(self, task: EvalTask) -> "Future[Evaluation]":
        future = super().submit(task)
        done: Future[Evaluation] = Future()
        evaluation = future.result()
        declared = tunables(task.source) or {}
        if evaluation.accepted and "BLOCK" in declared:
            factor = SPEED[declared["BLOCK"][0]]
            evaluation.speedup = factor
            evaluation.candidate_timing.median_ms = 1.0 / factor
        evaluation.tier = task.policy.tier
        done.set_result(evaluation)
        return done


def test_variants_pin_one_value_each_default_first_then_one_change_at_a_time() -> None:
    found = variants(TUNED, 4)
    assert [v.label for v in found] == ["BLOCK=32,UNROLL=1", "BLOCK=32,UNROLL=4", "BLOCK=64,UNROLL=1",
                                        "BLOCK=128,UNROLL=1"]
    assert found[0].default and not any(v.default for v in found[1:])
    assert len({v.source for v in found}) == 4  # distinct sources: distinct content-hashed builds
    assert tunables(found[2].source) == {"BLOCK": [64], "UNROLL": [1]}
    assert found[2].source.replace("'BLOCK': [64], 'UNROLL': [1]", "") == \
        TUNED.replace('"BLOCK": [32, 64, 128], "UNROLL": [1, 4]', "")  # nothing else changed
    assert len(variants(TUNED, 100)) == 6 and variants(fake_kernel("accepted 1.0"), 8) == []
    assert len(variants(found[1].source, 8)) == 1  # a pinned variant has nothing left to tune


@pytest.mark.parametrize("declaration", ['TUNE = {"B": 64}', 'TUNE = {"B": []}', 'TUNE = {"not an id": [1]}',
                                         'TUNE = {"B": [1, 1]}', "TUNE = dict(B=[1, 2])"])
def test_a_malformed_declaration_says_what_to_write(declaration: str) -> None:
    with pytest.raises(TuneError, match="TUNE"):
        variants(fake_kernel("accepted 1.0", declaration), 8)


def test_the_budget_is_variants_or_seconds() -> None:
    assert TuneBudget.parse("8") == TuneBudget(variants=8) and TuneBudget.parse("60s") == TuneBudget(None, 60.0)
    assert TuneBudget.parse("0").off and not TuneBudget.parse("3").off
    for bad in ("lots", "2.5", "-1"):
        with pytest.raises(ValueError):
            TuneBudget.parse(bad)
    with pytest.raises(ValueError, match="tune budget"):
        OptimizeConfig(tune_budget="many")


def test_a_run_tunes_without_an_llm_call_and_reports_only_the_full_evaluation(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [coder_reply(TUNED), judge_reply("vectorize"),
                                              coder_reply(fake_kernel("accepted 1.1"))]}))
    db = f"sqlite:///{tmp_path / 'tune.db'}"
    executor = TuningExecutor()
    summary = run_optimize("relu", OptimizeConfig(device="cpu", rounds=2, patience=5, tune_budget="4"),
                           ModelSpec(model=f"scripted:{script}"), db, executor=executor)
    tiers = [task.policy.tier for task in executor.submitted]
    assert tiers.count("screening") == 4 and tiers.count("full") == 3  # the seed, the winner, round 2's kernel
    assert summary["best"]["speedup"] == 1.5  # BLOCK=64, by the full protocol
    assert "BLOCK': [64]" in Path(summary["best"]["path"]).read_text()
    with open_store(db)() as session:
        calls = list(session.scalars(select(LLMCallRow).order_by(LLMCallRow.id)))
        candidates = list(session.scalars(select(CandidateRow).order_by(CandidateRow.id)))
        evaluations = list(session.scalars(select(EvaluationRow)))
        origins = {e.id: e.candidate.origin for e in evaluations}
    assert [c.purpose for c in calls] == ["coder", "judge", "coder"]  # tuning asked no model
    parent = next(c for c in candidates if c.origin == "llm" and c.round == 0)
    tuned = [c for c in candidates if (c.origin or "").startswith("tune:")]
    assert len(tuned) == 4 and all(c.parent_id == parent.id for c in tuned)
    assert all(e.record["tier"] == "full" for e in evaluations) and len(evaluations) == 3
    winner = next(e for e in evaluations if origins[e.id] == "tune:BLOCK=64,UNROLL=1")
    assert winner.speedup == 1.5
    judge = calls[1].messages[-1]["content"]
    assert "tuned BLOCK=64,UNROLL=1: 1.50x" in judge and "for ranking only" in judge
    assert "tuned BLOCK=64,UNROLL=1 by the full protocol: 1.50x" in judge


def test_tuning_off_evaluates_the_kernel_as_written(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [coder_reply(TUNED)]}))
    executor = TuningExecutor()
    summary = run_optimize("relu", OptimizeConfig(device="cpu", rounds=1, tune_budget="0"),
                           ModelSpec(model=f"scripted:{script}"), f"sqlite:///{tmp_path / 'off.db'}",
                           executor=executor)
    assert [t.policy.tier for t in executor.submitted] == ["full"] and summary["best"]["speedup"] == 1.0


def test_the_bundled_tunable_kernel_declares_its_constants() -> None:
    source = bundled_tunable(find_bundled("Square_matrix_multiplication")).read_text()
    declared = tunables(source)
    assert declared is not None and set(declared) == {"ROWS", "BLOCK_J", "BLOCK_K"}
    assert len({v.source for v in variants(source, 8)}) == 8


def test_a_bad_tune_budget_is_a_usage_error() -> None:
    from kernelwright.eval_service import UsageError
    from agent.run_spec import Execution
    from kernelwright.optimize_service import optimize_config

    with pytest.raises(UsageError, match="--tune-budget"):
        optimize_config(Execution(), rounds=1, tune_budget="lots")
    assert optimize_config(Execution(), rounds=1, tune_budget="30s").tune_budget == "30s"
