"""`rerun` is a reproduction: its prompts draw on the exemplars the original run saw, not on what the store has
gathered since (unless asked for fresh ones), and a resumed rerun keeps doing so."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from kernelwright.optimize_service import rerun_optimize, run_optimize
from store import LLMCallRow, open_store
from store.runs import get_run
from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel, judge_reply

ORIGINAL = [fake_kernel("accepted 1.5"), fake_kernel("accepted 1.6")]
LATER = fake_kernel("accepted 5.0", body="# a kernel another run found later")


def _script(tmp_path: Path, name: str, kernels: list[str]) -> str:
    path = tmp_path / name
    replies = [r for kernel in kernels for r in (coder_reply(kernel), judge_reply())]
    path.write_text(json.dumps({"replies": replies}))
    return f"scripted:{path}"


def _optimize(db: str, model: str, rounds: int) -> str:
    config = OptimizeConfig(device="cpu", rounds=rounds, patience=9)
    return run_optimize("relu", config, ModelSpec(model=model), db, executor=ScriptedExecutor())["run_id"]


def _coder_prompts(db: str, run_id: str) -> list[str]:
    with open_store(db)() as session:
        calls = session.scalars(select(LLMCallRow).where(LLMCallRow.run_id == run_id, LLMCallRow.purpose == "coder")
                                .order_by(LLMCallRow.id))
        return [json.dumps(call.messages) for call in calls]


def test_a_rerun_sends_the_prompts_of_its_original_run(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    original = _optimize(db, _script(tmp_path, "a.json", ORIGINAL), rounds=2)
    _optimize(db, _script(tmp_path, "b.json", [LATER]), rounds=1)  # the store grows after the original run
    again = rerun_optimize(original, db, executor=ScriptedExecutor())["run_id"]
    assert _coder_prompts(db, again) == _coder_prompts(db, original)
    assert "another run found later" not in "".join(_coder_prompts(db, again))
    assert get_run(open_store(db), again).config["exemplars_before"]  # kept for --resume and for its own reruns
    fresh = rerun_optimize(original, db, executor=ScriptedExecutor(), fresh_exemplars=True)["run_id"]
    assert "another run found later" in "".join(_coder_prompts(db, fresh))
