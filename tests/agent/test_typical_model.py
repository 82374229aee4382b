"""A scripted "typical model" against the real CPU harness: it writes `torch/extension.h` habits into the light
form (TORCH_CHECK, then data_ptr<float>()), each a real compile error, before a correct kernel. Without the repair
step (repair_attempts=0) every mistake costs a judge round; with it (the default) the run is accepted in its
first round and no judge is asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from harness.policy import EvalPolicy
from kernelwright.optimize_service import run_optimize
from store import LLMCallRow, open_store
from tests.agent.fake_executor import coder_reply, judge_reply
from tests.agent.real_executor import EvaluatingExecutor
from tests.agent.scripts import own_light_relu

pytestmark = pytest.mark.slow


def typical_replies() -> list[dict[str, str]]:
    """Three files, as a model trained on torch/extension.h code writes them, and a judge reply after each."""
    base = own_light_relu("kw_relu_typical")  # not the contract's example: a copy of it is never a kernel found
    checked = base.replace("    const int64_t n = input.numel();",
                           '    TORCH_CHECK(input.numel() > 0, "empty");\n    const int64_t n = input.numel();')
    pointer = checked.replace("TORCH_CHECK(", "STD_TORCH_CHECK(").replace(
        "static_cast<const float*>(input.data_ptr())", "input.data_ptr<float>()")
    fixed = pointer.replace("input.data_ptr<float>()", "input.const_data_ptr<float>()")
    assert checked != base and pointer != checked and fixed != pointer
    advice = judge_reply("fix the compile error the log names")
    return [coder_reply(checked), advice, coder_reply(pointer), advice, coder_reply(fixed), advice,
            coder_reply(fixed)]


def _run(tmp_path: Path, repair_attempts: int) -> tuple[dict, list[str]]:
    script = tmp_path / f"typical{repair_attempts}.json"
    script.write_text(json.dumps({"replies": typical_replies()}))
    db = f"sqlite:///{tmp_path / f'typical{repair_attempts}.db'}"
    config = OptimizeConfig(device="cpu", rounds=4, patience=1, repair_attempts=repair_attempts,
                            stop_at_first_accepted=True, policy=EvalPolicy(timing_budget_s=0.1))
    summary = run_optimize("relu", config, ModelSpec(model=f"scripted:{script}"), db, executor=EvaluatingExecutor())
    with open_store(db)() as session:
        purposes = [c.purpose for c in session.scalars(select(LLMCallRow).order_by(LLMCallRow.id))]
    return summary, purposes


def test_the_typical_model_needs_one_round_with_repairs_and_three_without(tmp_path: Path) -> None:
    before, calls_before = _run(tmp_path, repair_attempts=0)
    after, calls_after = _run(tmp_path, repair_attempts=2)
    assert before["best"]["round"] == 3 and calls_before == ["coder", "judge", "coder", "judge", "coder"]
    assert after["best"]["round"] == 1 and calls_after == ["coder", "repair1", "repair2"]
    assert before["status"] == after["status"] == "first_accepted"
