"""The replies real small models (Qwen2.5-Coder-0.5B and -1.5B, Q4_K_M under llama.cpp) gave to this project's
prompts, recorded once (tests/fixtures/small-model-replies.jsonl), served again by the fake OpenAI-compatible
endpoint, and an executor that judges a kernel by what it holds (the loop's decisions are under test, not the
harness)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from harness.execution.eval_task import EvalTask
from tests.agent.fake_executor import ScriptedExecutor

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "small-model-replies.jsonl"


def recorded() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]


def reply(problem: str, purpose: str, round_: int, model: str = "0.5B") -> dict[str, Any]:
    """One recorded reply, as a ScriptedServer "reply" step's value."""
    found = [r for r in recorded() if problem in r["problem"] and r["purpose"] == purpose and r["round"] == round_
             and model in r["model"]]
    assert len(found) == 1, (problem, purpose, round_, model)
    return {"content": found[0]["reply"], "finish_reason": found[0]["finish_reason"],
            "completion_tokens": found[0]["completion_tokens"]}


class ContentExecutor(ScriptedExecutor):
    """A ScriptedExecutor whose verdict comes from `mark(source)` ("accepted 1.2", "runtime_error", ...), for
    kernels that carry no `# fake:` comment."""

    def __init__(self, mark: Callable[[str], str]) -> None:
        super().__init__()
        self.mark = mark

    def _timed(self, task: EvalTask) -> Any:
        return super()._timed(replace(task, source=f"# fake: {self.mark(task.source)}\n{task.source}"))
