"""The repair step, with scripted replies and scripted evaluations: a candidate that fails to build or run goes
back to the coder with its error for up to `repair_attempts` direct fixes before the judge is asked; every
attempt is evaluated and recorded; a wrong answer (incorrect) is the judge's to diagnose, not a repair's."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import func, select

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from kernelwright.optimize_service import run_optimize
from store import CandidateRow, EvaluationRow, LLMCallRow, open_store
from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel, judge_reply

BROKEN = [fake_kernel("compile_error", f"# attempt {n}") for n in range(4)]
CRASHING = fake_kernel("runtime_error")
FAST, WRONG = fake_kernel("accepted 1.5"), fake_kernel("incorrect")


def _run(tmp_path: Path, replies: list[dict[str, str]], **config: object) -> tuple[dict, ScriptedExecutor, str]:
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": replies}))
    db = f"sqlite:///{tmp_path / 'repair.db'}"
    executor = ScriptedExecutor()
    options = {"device": "cpu", "rounds": 1, "patience": 5, **config}
    summary = run_optimize("relu", OptimizeConfig(**options), ModelSpec(model=f"scripted:{script}"), db,
                           executor=executor)
    return summary, executor, db


def _calls(db: str) -> list[LLMCallRow]:
    with open_store(db)() as session:
        return list(session.scalars(select(LLMCallRow).order_by(LLMCallRow.id)))


def test_a_build_failure_is_repaired_without_a_judge_round(tmp_path: Path) -> None:
    summary, executor, db = _run(tmp_path, [coder_reply(BROKEN[0]), coder_reply(FAST)])
    assert summary["status"] == "finished" and summary["best"]["speedup"] == 1.5 and summary["best"]["round"] == 1
    calls = _calls(db)
    assert [(c.round, c.purpose, c.slot) for c in calls] == [(0, "coder", 0), (0, "repair1", 0)]
    repair_prompt = calls[1].messages[-1]["content"]
    assert "did not build" in repair_prompt and "[scripted] compile_error" in repair_prompt
    assert BROKEN[0].strip() in repair_prompt
    assert len(executor.submitted) == 2
    with open_store(db)() as session:
        origins = {row.source: row.origin for row in session.scalars(select(CandidateRow))}
    assert origins == {BROKEN[0]: "llm", FAST: "llm:repair1"}  # the store tells a fix from the round's kernel
    folder = Path(summary["folder"])
    assert (folder / "candidates" / "round1_candidate1_repair1.py").read_text() == FAST
    assert "| 1 | 1 (repair 1) | accepted |" in (folder / "report.md").read_text()


def test_repairs_are_bounded_every_attempt_is_recorded_and_the_judge_reads_the_last(tmp_path: Path) -> None:
    replies = [coder_reply(BROKEN[0]), coder_reply(BROKEN[1]), coder_reply(CRASHING), judge_reply("fix the launch bounds"),
               coder_reply(FAST)]
    summary, executor, db = _run(tmp_path, replies, rounds=2)
    calls = _calls(db)
    assert [c.purpose for c in calls] == ["coder", "repair1", "repair2", "judge", "coder"]
    assert "failed while running" not in calls[1].messages[-1]["content"]
    assert "failed while running" not in calls[2].messages[-1]["content"]  # repair 2 fixes repair 1's build
    assert "verdict: runtime_error" in calls[3].messages[-1]["content"]  # the judge reads the latest attempt
    with open_store(db)() as session:
        verdicts = sorted(row.verdict for row in session.scalars(select(EvaluationRow)))
    assert verdicts == ["accepted", "compile_error", "compile_error", "runtime_error"]
    assert summary["best"]["round"] == 2


def test_a_runtime_error_is_repaired_too_and_a_wrong_answer_is_not(tmp_path: Path) -> None:
    _, _, db = _run(tmp_path, [coder_reply(CRASHING), coder_reply(WRONG)])
    calls = _calls(db)
    assert [c.purpose for c in calls] == ["coder", "repair1"]
    assert "failed while running" in calls[1].messages[-1]["content"]


def test_no_repairs_when_turned_off_and_a_repeated_kernel_ends_the_chain(tmp_path: Path) -> None:
    _, _, db = _run(tmp_path, [coder_reply(BROKEN[0]), judge_reply(), coder_reply(FAST)], rounds=2,
                    repair_attempts=0)
    assert [c.purpose for c in _calls(db)] == ["coder", "judge", "coder"]
    # the same file back is told so once; sent again, it ends the chain (evaluated once)
    _, executor, db = _run(tmp_path / "again", [coder_reply(BROKEN[0])] * 3)
    calls = _calls(db)
    assert [c.purpose for c in calls] == ["coder", "repair1", "repair1+same"] and len(executor.submitted) == 1
    assert calls[-1].messages[-1]["content"].startswith("This is the same file you sent before")


def test_best_of_n_repairs_each_failed_slot(tmp_path: Path) -> None:
    replies = [coder_reply(BROKEN[0]), coder_reply(FAST), coder_reply(fake_kernel("accepted 2.0"))]
    summary, _, db = _run(tmp_path, replies, candidates=2)
    assert [(c.purpose, c.slot) for c in _calls(db)] == [("coder", 0), ("coder", 1), ("repair1", 0)]
    assert summary["best"]["speedup"] == 2.0
    with open_store(db)() as session:
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 3


def test_the_rounds_other_attempts_reach_the_judge_and_the_coder(tmp_path: Path) -> None:
    replies = [coder_reply(BROKEN[0]), coder_reply(FAST), judge_reply("unroll"), coder_reply(FAST),
               coder_reply(FAST)]
    _, _, db = _run(tmp_path, replies, candidates=2, rounds=2, repair_attempts=0)
    calls = _calls(db)
    judge = next(c for c in calls if c.purpose == "judge").messages[-1]["content"]
    coder = [c for c in calls if c.purpose == "coder" and c.round == 1][0].messages[-1]["content"]
    for prompt in (judge, coder):
        assert "The round's other attempts:\n- candidate 1: compile_error: <evaluation-output> [scripted] compile_error </evaluation-output>" in prompt
    assert "speedup: 1.500x" in judge  # the judged kernel is the accepted one, shown in full
