"""A real failed build's compiler error reaches the model: a light-form kernel written with `torch/extension.h`
habits (`TORCH_CHECK`) fails to build on the CPU, and its `error:` line, mapped to the candidate's own line, is in
the evaluation's reasons and in the next prompt the model receives (the log's first 1500 characters are ninja's
banner and the compiler command, which is all a model saw before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from harness.policy import EvalPolicy
from kernelwright.optimize_service import run_optimize
from store import EvaluationRow, LLMCallRow, open_store
from tests.agent.fake_executor import coder_reply, judge_reply
from tests.agent.fake_server import ScriptedServer
from tests.agent.real_executor import EvaluatingExecutor
from tests.agent.scripts import own_light_relu

pytestmark = pytest.mark.slow
ERROR_LINE = "‘TORCH_CHECK’ was not declared in this scope"


def torch_check_kernel() -> str:
    """The bundled CPU example with one `torch/extension.h` habit: TORCH_CHECK (the stable ABI's is STD_TORCH_CHECK)."""
    source = own_light_relu("kw_relu_check")  # not the contract's example: a copy of it is never a kernel found
    return source.replace("    const int64_t n = input.numel();",
                          '    TORCH_CHECK(input.numel() > 0, "empty input");\n    const int64_t n = input.numel();')


def test_a_real_build_error_reaches_the_next_prompt(tmp_path: Path) -> None:
    bad = torch_check_kernel()
    replies = [coder_reply(bad), judge_reply("use STD_TORCH_CHECK"), *[coder_reply(bad)] * 3]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": replies}))
    db = f"sqlite:///{tmp_path / 'feedback.db'}"
    config = OptimizeConfig(device="cpu", rounds=2, patience=5, policy=EvalPolicy(timing_budget_s=0.1))
    run_optimize("relu", config, ModelSpec(model=f"scripted:{script}"), db, executor=EvaluatingExecutor())
    with open_store(db)() as session:
        [reasons] = {tuple(row.reasons) for row in session.scalars(select(EvaluationRow))}
        calls = list(session.scalars(select(LLMCallRow).order_by(LLMCallRow.id)))
    assert any(ERROR_LINE in reason for reason in reasons), reasons
    checked_line = next(n for n, line in enumerate(bad.splitlines(), 1) if "TORCH_CHECK" in line)
    after_the_build = [c.messages[-1]["content"] for c in calls[1:]]
    assert after_the_build and all(ERROR_LINE in prompt for prompt in after_the_build)
    assert f"(line {checked_line} of your file)" in after_the_build[0]


def test_a_model_with_extension_h_habits_is_repaired_without_a_judge_round(tmp_path: Path) -> None:
    """The fix the compiler itself suggests (STD_TORCH_CHECK), written in the repair call: accepted in round 1,
    and the judge is never asked."""
    bad = torch_check_kernel().replace("kw_relu_check", "kw_relu_fix")
    fixed = bad.replace("TORCH_CHECK(", "STD_TORCH_CHECK(")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [coder_reply(bad), coder_reply(fixed)]}))
    db = f"sqlite:///{tmp_path / 'repair.db'}"
    config = OptimizeConfig(device="cpu", rounds=1, policy=EvalPolicy(timing_budget_s=0.1))
    summary = run_optimize("relu", config, ModelSpec(model=f"scripted:{script}"), db, executor=EvaluatingExecutor())
    assert summary["best"] is not None and summary["best"]["verdict"] == "accepted", summary
    with open_store(db)() as session:
        calls = list(session.scalars(select(LLMCallRow).order_by(LLMCallRow.id)))
        verdicts = [row.verdict for row in session.scalars(select(EvaluationRow).order_by(EvaluationRow.id))]
    assert [c.purpose for c in calls] == ["coder", "repair1"] and verdicts == ["compile_error", "accepted"]
    assert ERROR_LINE in calls[1].messages[-1]["content"]


def test_over_an_openai_compatible_endpoint_the_next_request_holds_the_error_line(tmp_path: Path) -> None:
    """As a served model sees it: the request after the failed build carries the compiler's error line."""
    bad = torch_check_kernel()
    fixed = bad.replace("TORCH_CHECK(", "STD_TORCH_CHECK(").replace("kw_relu_check", "kw_relu_fix")
    db = f"sqlite:///{tmp_path / 'served.db'}"
    config = OptimizeConfig(device="cpu", rounds=1, policy=EvalPolicy(timing_budget_s=0.1))
    with ScriptedServer([("ok", f"```python\n{bad}```"), ("ok", f"Fixed:\n```python\n{fixed}```")]) as server:
        summary = run_optimize("relu", config, ModelSpec(model="served-model", base_url=server.url,
                                                         api_key_env="NONE"), db, executor=EvaluatingExecutor())
    assert len(server.requests) == 2 and summary["best"] is not None
    prompt = server.requests[1]["body"]["messages"][-1]["content"]
    assert ERROR_LINE in prompt and "did not build" in prompt
