"""The loop with scripted replies and scripted evaluations (no C++ builds): repair, best-of-N, dedup, timing one
candidate at a time, concurrent coder calls, endpoint failures, budgets, resume and rerun from the stored spec.
The real pipeline end to end is in test_resume.py."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from agent.config import OptimizeConfig
from agent.llm import LLMError, LLMReply, Message, Usage
from agent.loop import Optimizer
from agent.recorder import RunRecorder
from agent.run_spec import ModelSpec, ProblemRef, RunSpec
from agent.scripted import ScriptedModel
from harness.policy import EvalPolicy
from kernelbench.bundled import find_bundled
from kernelwright.interrupts import RunInterrupted
from kernelwright.optimize_service import rerun_optimize, run_optimize
from store import CandidateRow, EvaluationRow, LLMCallRow, RunRow, open_store
from tests.agent.fake_executor import (ScriptedExecutor, coder_reply, fake_kernel, judge_reply, overlapping)

WRONG, FAST, FASTER = fake_kernel("incorrect"), fake_kernel("accepted 1.5"), fake_kernel("accepted 2.5")


def _script(folder: Path, replies: list[dict[str, str]]) -> str:
    path = folder / "script.json"
    path.write_text(json.dumps({"replies": replies}))
    return f"scripted:{path}"


def _run(tmp_path: Path, replies: list[dict[str, str]], executor: ScriptedExecutor | None = None,
         **config: object) -> tuple[dict, ScriptedExecutor, str]:
    db = f"sqlite:///{tmp_path / 'loop.db'}"
    executor = executor or ScriptedExecutor()
    options = {"device": "cpu", "rounds": 3, "patience": 5, **config}
    summary = run_optimize("relu", OptimizeConfig(**options), ModelSpec(model=_script(tmp_path, replies)), db,
                           executor=executor)
    return summary, executor, db


REPAIR = [coder_reply(WRONG), judge_reply("return the kernel's output unscaled"), coder_reply(FAST),
          judge_reply("keep it"), coder_reply(FAST)]


def test_scripted_run_repairs_then_keeps_the_best(tmp_path: Path) -> None:
    summary, executor, db = _run(tmp_path, REPAIR)
    assert summary["status"] == "finished" and summary["llm_calls"] == 5
    assert summary["best"]["verdict"] == "accepted" and summary["best"]["round"] == 2
    assert summary["best"]["speedup"] == pytest.approx(1.5)
    folder = Path(summary["folder"])
    assert (folder / "best.py").read_text() == FAST
    assert "| 1 | 1 | incorrect |" in (folder / "report.md").read_text()
    assert len((folder / "transcript.jsonl").read_text().splitlines()) == 5
    assert len(executor.submitted) == 2  # round 3's identical kernel was not evaluated again
    with open_store(db)() as session:
        calls = {(c.round, c.purpose): c for c in session.scalars(select(LLMCallRow))}
        assert "verdict: incorrect" in calls[(1, "judge")].messages[-1]["content"]
        assert "return the kernel's output unscaled" in calls[(1, "coder")].messages[-1]["content"]
        third = calls[(2, "coder")].messages[-1]["content"]  # the one accepted kernel is the best: shown once
        assert "The best kernel so far" in third and "Earlier accepted kernels" not in third
        assert third.count(FAST.strip()) == 1
        assert session.scalar(select(func.count()).select_from(EvaluationRow)) == 2
        assert session.scalar(select(func.count()).select_from(CandidateRow)) == 2


def test_the_run_spec_is_stored_whole(tmp_path: Path) -> None:
    summary, _, db = _run(tmp_path, REPAIR, rounds=1, budget_usd=3.0)
    with open_store(db)() as session:
        spec = RunSpec.model_validate(session.get(RunRow, summary["run_id"]).config)
    assert spec.models.model.startswith("scripted:") and spec.optimize.budget_usd == 3.0
    assert spec.optimize.rounds == 1 and spec.optimize.policy.trials == EvalPolicy().trials
    assert spec.problem.key == find_bundled("relu").key and spec.problem.fingerprint == find_bundled("relu").fingerprint
    assert spec.kernelwright_version and (spec.kernelwright_commit is None or len(spec.kernelwright_commit) >= 40)


def test_best_of_four_is_timed_one_candidate_at_a_time(tmp_path: Path) -> None:
    kernels = [fake_kernel(f"accepted {1 + slot}") for slot in range(4)]
    executor = ScriptedExecutor(workers=4, build_s=0.05, time_s=0.05)
    summary, executor, _ = _run(tmp_path, [coder_reply(k) for k in kernels], executor, rounds=1, candidates=4)
    assert len(executor.timed) == 4 and summary["best"]["speedup"] == pytest.approx(4.0)
    assert overlapping(executor.timed) == [], "two candidates were timed at the same time"
    assert summary["seconds"]["compile"] == pytest.approx(4 * 0.05)  # the executor's build steps, reported


def test_the_overlap_check_catches_concurrent_timing(tmp_path: Path) -> None:
    """The check above can fail: without the gate, four candidates of a round are timed at once."""
    kernels = [fake_kernel(f"accepted {1 + slot}") for slot in range(4)]
    executor = ScriptedExecutor(workers=4, time_s=0.2, gated=False)
    _run(tmp_path, [coder_reply(k) for k in kernels], executor, rounds=1, candidates=4)
    assert overlapping(executor.timed)


class SlowModel:
    """An HTTP-like model: each call takes `seconds`; records how many calls were in flight at once."""

    name = "slow"

    def __init__(self, seconds: float, content: str) -> None:
        self.seconds, self.content, self.in_flight, self.most = seconds, content, 0, 0
        self.lock = threading.Lock()

    def complete(self, messages: list[Message], *, purpose: str, max_tokens: int | None = None) -> LLMReply:
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(self.seconds)
        with self.lock:
            self.in_flight -= 1
        return LLMReply(content=self.content, model=self.name, usage=Usage(prompt_tokens=10, completion_tokens=10))


def _optimizer(tmp_path: Path, coder: object, config: OptimizeConfig, executor: ScriptedExecutor) -> Optimizer:
    sessions = open_store(f"sqlite:///{tmp_path / 'direct.db'}")
    problem = find_bundled("relu")
    spec = RunSpec(problem=ProblemRef(key=problem.key, fingerprint=problem.fingerprint), optimize=config)
    recorder = RunRecorder.start(sessions, problem, spec, tmp_path / "runs")
    return Optimizer(problem, coder, coder, config, recorder, executor)


def test_the_coder_calls_of_a_round_run_concurrently(tmp_path: Path) -> None:
    model = SlowModel(0.3, f"```python\n{FAST}```")
    optimizer = _optimizer(tmp_path, model, OptimizeConfig(rounds=1, candidates=4), ScriptedExecutor())
    result = optimizer.run()
    assert model.most == 4 and optimizer.seconds["llm_wait"] < 1.0
    assert [o.attempt.verdict for o in result.outcomes] == ["accepted"] * 4


def test_only_the_judged_kernel_is_profiled_and_the_verdict_is_left_alone(tmp_path: Path) -> None:
    replies = [coder_reply(FAST), coder_reply(FASTER)]
    executor = ScriptedExecutor()
    optimizer = _optimizer(tmp_path, ScriptedModel(Path(_script(tmp_path, replies).removeprefix("scripted:"))),
                           OptimizeConfig(device="cuda", rounds=1, candidates=2), executor)
    result = optimizer.run()
    assert [task.source for task, _ in executor.profiled] == [FASTER]
    assert result.best.attempt.profile["ncu"][0]["kernel"] == "fake" and not result.best.evaluation.metrics
    with optimizer.recorder.sessions() as session:
        records = {row.candidate.source: row.record for row in session.scalars(select(EvaluationRow))}
    assert records[FASTER]["metrics"]["ncu"] and not records[FAST]["metrics"]
    assert records[FASTER]["verdict"] == "accepted"


def _refused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.timing
def test_a_dead_endpoint_fails_the_run_at_once(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'dead.db'}"
    models = ModelSpec(model="qwen", base_url=f"http://127.0.0.1:{_refused_port()}/v1", api_key_env="NONE")
    started = time.perf_counter()
    summary = run_optimize("relu", OptimizeConfig(device="cpu", rounds=4), models, db, executor=ScriptedExecutor())
    assert time.perf_counter() - started < 10
    assert summary["status"] == "failed" and "cannot reach" in summary["message"]
    with open_store(db)() as session:
        assert session.get(RunRow, summary["run_id"]).status == "failed"
        assert [c.purpose for c in session.scalars(select(LLMCallRow))] == ["coder"]  # no judge after it


class FailingModel:
    name = "failing"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, messages: list[Message], *, purpose: str, max_tokens: int | None = None) -> LLMReply:
        self.calls += 1
        raise LLMError("HTTP 503 after 5 attempts")


def test_repeated_llm_failures_stop_the_run_as_failed(tmp_path: Path) -> None:
    model = FailingModel()
    result = _optimizer(tmp_path, model, OptimizeConfig(rounds=10, max_llm_failures=3), ScriptedExecutor()).run()
    assert result.status == "failed" and model.calls == 3 and "3 LLM calls in a row failed" in result.message


def test_unparseable_reply_and_exhausted_script_are_failed_attempts_not_crashes(tmp_path: Path) -> None:
    summary, _, _ = _run(tmp_path, [{"purpose": "coder", "content": "I refuse."}], rounds=2)
    assert summary["best"] is None and summary["status"] == "no_kernel"
    assert "no kernel to evaluate: 1 of 2 replies" in summary["message"]
    report = (Path(summary["folder"]) / "report.md").read_text()
    assert "unparseable" in report and "llm_error" in report


def test_token_budget_stops_before_the_next_round(tmp_path: Path) -> None:
    summary, _, _ = _run(tmp_path, REPAIR, max_tokens=1)
    assert summary["status"] == "max_tokens" and summary["llm_calls"] == 1


class InterruptingExecutor(ScriptedExecutor):
    """Ctrl-C arrives while the `nth` evaluation runs."""

    def __init__(self, nth: int) -> None:
        super().__init__()
        self.nth = nth

    def _run(self, task):  # type: ignore[no-untyped-def]
        if len(self.submitted) == self.nth:
            raise KeyboardInterrupt
        return super()._run(task)


def test_resume_alone_restores_models_and_budgets_and_redoes_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'resume.db'}"
    config = OptimizeConfig(device="cpu", rounds=3, patience=5)
    with pytest.raises(RunInterrupted) as stop:
        run_optimize("relu", config, ModelSpec(model=_script(tmp_path, REPAIR)), db, executor=InterruptingExecutor(2))
    run_id = stop.value.run_id
    assert stop.value.resume_command == f"kernelwright optimize --resume {run_id} --db {db}"
    with open_store(db)() as session:
        assert session.get(RunRow, run_id).status == "interrupted"
    executor = ScriptedExecutor()
    summary = run_optimize(None, OptimizeConfig(rounds=1), ModelSpec(), db, resume=run_id, executor=executor)
    assert summary["run_id"] == run_id and summary["status"] == "finished" and summary["best"]["round"] == 2
    assert [t.source for t in executor.submitted] == [FAST]  # round 1's verdict was replayed from the store
    with open_store(db)() as session:
        calls = session.execute(select(LLMCallRow.round, LLMCallRow.purpose, LLMCallRow.slot)).all()
    assert len(calls) == len(set(calls)) == 5


def test_rerun_starts_a_new_run_from_the_stored_spec(tmp_path: Path) -> None:
    summary, _, db = _run(tmp_path, REPAIR, rounds=2, budget_usd=7.0)
    (tmp_path / "script.json").write_text(json.dumps({"replies": REPAIR}))  # the script is replayed afresh
    again = rerun_optimize(summary["run_id"], db, executor=ScriptedExecutor())
    assert again["run_id"] != summary["run_id"] and again["best"]["round"] == 2
    with open_store(db)() as session:
        first, second = (RunSpec.model_validate(session.get(RunRow, r).config)
                         for r in (summary["run_id"], again["run_id"]))
    assert first == second


def test_scripted_model_matches_replies_to_the_problem(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [{"purpose": "coder", "problem": "GELU", "content": "gelu"},
                                              {"purpose": "coder", "problem": "ReLU", "content": "relu"}]}))
    model = ScriptedModel(script)
    assert model.complete([{"role": "user", "content": "class ReLU"}], purpose="coder").content == "relu"
    with pytest.raises(LLMError):
        model.complete([{"role": "user", "content": "class ReLU"}], purpose="coder")
