"""Honest run outcomes (issue 34, item 2): a run in which the model never wrote a kernel ends `no_kernel` with
a non-zero exit, not `finished`; a judge reply that is not the JSON asked for is asked again once, and a second
bad one is reported as unparsed, never passed on as the change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from kernelwright.optimize_service import run_optimize
from store import LLMCallRow, open_store
from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel, judge_reply

FAST, WRONG = fake_kernel("accepted 1.5"), fake_kernel("incorrect")
CODE_AS_ADVICE = "Here is the fixed kernel:\n```python\nclass ModelNew:\n    pass  # 200 lines\n```"


def _script(folder: Path, replies: list[dict[str, str]]) -> Path:
    path = folder / "script.json"
    path.write_text(json.dumps({"replies": replies}))
    return path


def _run(tmp_path: Path, replies: list[dict[str, str]], **config: object) -> tuple[dict, str]:
    db = f"sqlite:///{tmp_path / 'outcomes.db'}"
    options = {"device": "cpu", "rounds": 2, "patience": 5, **config}
    summary = run_optimize("relu", OptimizeConfig(**options), ModelSpec(model=f"scripted:{_script(tmp_path, replies)}"),
                           db, executor=ScriptedExecutor())
    return summary, db


def _calls(db: str) -> list[LLMCallRow]:
    with open_store(db)() as session:
        return list(session.scalars(select(LLMCallRow).order_by(LLMCallRow.id)))


def test_refusals_only_end_no_kernel_with_a_non_zero_exit(tmp_path: Path) -> None:
    replies = [{"purpose": "coder", "content": "I can't help with writing that kernel."},
               {"purpose": "coder", "content": "```python\nclass ModelNew(nn.Module):\n    def forward(self, x):"}] * 2
    command = [str(Path(sys.executable).parent / "kernelwright"), "optimize", "relu", "--device", "cpu", "--model",
               f"scripted:{_script(tmp_path, replies)}", "--rounds", "2", "--db", f"sqlite:///{tmp_path / 'cli.db'}",
               "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KERNELWRIGHT_HOME": str(tmp_path / "home")})
    summary = json.loads(done.stdout)
    assert done.returncode != 0 and summary["status"] == "no_kernel" and summary["best"] is None
    assert "no kernel to evaluate: 2 of 2 replies" in summary["message"]
    assert "no kernel to evaluate" in (Path(summary["folder"]) / "report.md").read_text()
    entries = [json.loads(line) for line in (Path(summary["folder"]) / "transcript.jsonl").read_text().splitlines()]
    assert [e["purpose"] for e in entries if "reply" in e] == ["coder", "coder+"] * 2  # each asked once more
    assert sum("asked again" in e.get("note", "") for e in entries) == 2


def test_a_run_that_evaluated_a_kernel_is_not_no_kernel(tmp_path: Path) -> None:
    summary, _ = _run(tmp_path, [coder_reply(WRONG), judge_reply(), {"purpose": "coder", "content": "No."}])
    assert summary["status"] == "finished" and summary["best"] is None


def test_a_malformed_judge_reply_is_asked_again_once(tmp_path: Path) -> None:
    replies = [coder_reply(WRONG), {"purpose": "judge", "content": CODE_AS_ADVICE},
               judge_reply("return the kernel's output unscaled"), coder_reply(FAST)]
    summary, db = _run(tmp_path, replies)
    calls = _calls(db)
    assert [(c.purpose, c.slot) for c in calls] == [("coder", 0), ("judge", 0), ("judge", 1), ("coder", 0)]
    retry = calls[2].messages
    assert retry[-2] == {"role": "assistant", "content": CODE_AS_ADVICE}
    assert "could not be used: the reply has no JSON object" in retry[-1]["content"]
    assert "Make this change: return the kernel's output unscaled" in calls[3].messages[-1]["content"]
    assert "not usable" not in (Path(summary["folder"]) / "report.md").read_text()


def test_a_judge_that_stays_malformed_is_reported_and_its_text_is_not_the_change(tmp_path: Path) -> None:
    replies = [coder_reply(WRONG), {"purpose": "judge", "content": CODE_AS_ADVICE},
               {"purpose": "judge", "content": '["tile it"]'}, coder_reply(FAST)]
    summary, db = _run(tmp_path, replies)
    coder_prompt = _calls(db)[-1].messages[-1]["content"]
    assert "Make this change" not in coder_prompt and "class ModelNew:\n    pass  # 200 lines" not in coder_prompt
    assert "No reviewer advice this round" in coder_prompt
    folder = Path(summary["folder"])
    assert "round 2: the judge's advice was not usable, twice" in (folder / "report.md").read_text()
    notes = [json.loads(line) for line in (folder / "transcript.jsonl").read_text().splitlines()]
    assert any("the round ran without advice" in entry.get("note", "") for entry in notes)
    assert summary["status"] == "finished" and summary["best"]["speedup"] == 1.5
