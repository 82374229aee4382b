"""The search keeps its best: after a slower round (or a failed one) the judge and the coder start again from the
run's best kernel, the slower attempt reaching them as one line; only that kernel is profiled."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from kernelwright.optimize_service import run_optimize
from store import LLMCallRow, open_store
from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel, judge_reply

FAST, SLOWER, WRONG = fake_kernel("accepted 1.5"), fake_kernel("accepted 1.2"), fake_kernel("incorrect")


def _prompts(tmp_path: Path, replies: list[dict[str, str]], **config: object) -> tuple[dict, list[LLMCallRow]]:
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": replies}))
    db = f"sqlite:///{tmp_path / 'search.db'}"
    options = {"device": "cpu", "patience": 5, **config}
    summary = run_optimize("relu", OptimizeConfig(**options), ModelSpec(model=f"scripted:{script}"), db,
                           executor=ScriptedExecutor())
    with open_store(db)() as session:
        return summary, list(session.scalars(select(LLMCallRow).order_by(LLMCallRow.id)))


def test_after_a_slower_round_the_search_returns_to_the_best_kernel(tmp_path: Path) -> None:
    unroll = {"purpose": "judge", "content": json.dumps({"diagnosis": "latency-bound", "change": "unroll by 4",
                                                           "expected_effect": "about 1.3x faster"})}
    replies = [coder_reply(FAST), unroll, coder_reply(SLOWER), judge_reply("prefetch"),
               coder_reply(WRONG), judge_reply("keep it"), coder_reply(FAST)]
    summary, calls = _prompts(tmp_path, replies, rounds=4)
    judges = [c.messages[-1]["content"] for c in calls if c.purpose == "judge"]
    coders = [c.messages[-1]["content"] for c in calls if c.purpose == "coder"]
    assert all("speedup: 1.500x" in prompt for prompt in judges)  # round 3 and 4's judges read the 1.5x kernel
    assert "- candidate 1: accepted, 1.20x" in judges[1]
    assert "- candidate 1: incorrect: <evaluation-output> [scripted] incorrect </evaluation-output>" in judges[2]
    assert f"The best kernel so far:\n```python\n{FAST.strip()}" in coders[2]
    assert f"The best kernel so far:\n```python\n{FAST.strip()}" in coders[3]
    assert summary["best"]["speedup"] == 1.5 and summary["best"]["round"] == 1
    history = ("What this run has tried so far:\n- round 1: got 1.50x (the best so far)\n"
               "- round 2: asked to unroll by 4 (expected: about 1.3x faster); got 1.20x (best so far 1.50x)\n"
               "- round 3: asked to prefetch; got incorrect: <evaluation-output> [scripted] incorrect </evaluation-output>")
    assert history in coders[3] and history in judges[2]


def test_without_an_accepted_kernel_the_coder_fixes_its_latest_failure(tmp_path: Path) -> None:
    _, calls = _prompts(tmp_path, [coder_reply(WRONG), judge_reply("fix the scale"), coder_reply(FAST)], rounds=2)
    assert f"Your previous attempt:\n```python\n{WRONG.strip()}" in calls[-1].messages[-1]["content"]


def test_first_round_candidates_each_get_their_own_direction(tmp_path: Path) -> None:
    replies = [coder_reply(fake_kernel(f"accepted 1.{n}")) for n in range(3)] + [judge_reply()] + \
        [coder_reply(FAST)] * 3
    _, calls = _prompts(tmp_path, replies, rounds=2, candidates=3)
    first = [c.messages[-1]["content"] for c in calls if c.purpose == "coder" and c.round == 0]
    later = [c.messages[-1]["content"] for c in calls if c.purpose == "coder" and c.round == 1]
    assert "The direction for this attempt" not in first[0] and len(set(first)) == 3
    assert "contiguous and branch-free" in first[1] and "Block the computation" in first[2]
    assert all("The direction for this attempt" not in prompt for prompt in later)
    _, calls = _prompts(tmp_path / "same", replies, rounds=1, candidates=3, diverse_first_round=False)
    assert len({c.messages[-1]["content"] for c in calls}) == 1


def test_a_run_can_stop_at_its_first_accepted_kernel(tmp_path: Path) -> None:
    summary, calls = _prompts(tmp_path, [coder_reply(WRONG), judge_reply(), coder_reply(FAST)], rounds=5,
                              stop_at_first_accepted=True)
    assert summary["status"] == "first_accepted" and summary["best"]["round"] == 2 and len(calls) == 3
