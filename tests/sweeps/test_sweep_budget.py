"""A model sweep's budgets and patience, on the CPU with scripted replies and scripted evaluations (no builds):
`--budget-usd` and `--max-tokens` hold for the whole sweep (no problem starts once they are spent, and `resume`
keeps them or takes larger ones), `--patience` reaches each problem's optimize run, and the sweep's totals are
those of the optimize runs it started, wherever they are shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.run_spec import Execution, ModelSpec, RunSpec, SweepSpec
from kernelbench.bundled import PROBLEMS_ROOT
from kernelwright.runs_service import run_details, runs_list, write_run_report
from kernelwright.sweep_service import run_sweep, select_problems, sweep_config
from store import open_store
from store import runs as run_store
from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel, judge_reply
from tests.agent.fake_server import ScriptedServer

NAMES = ["ReLU", "GELU", "Softmax"]
KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")


def _config(**options: object):  # one problem at a time, so the budget is checked between problems
    return sweep_config(Execution(device="cpu", workers=1), None, options.pop("rounds", 1), None, 60.0, 60.0,
                        False, False, False, **options)


def _script(tmp_path: Path, replies: list[dict[str, str]]) -> ModelSpec:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": replies}))
    return ModelSpec(model=f"scripted:{path}")


def _sweep(db: str, models: ModelSpec, resume: str | None = None, **options: object) -> dict:
    problems = None if resume else select_problems(PROBLEMS_ROOT, None, NAMES, None, None, 0, False)
    return run_sweep(problems, _config(**options), models, db, resume, executor=ScriptedExecutor())


def _statuses(summary: dict) -> list[str]:
    return [p["status"] for p in summary["problems"]]


def test_a_token_budget_stops_starting_problems_and_resume_keeps_or_raises_it(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    models = _script(tmp_path, [coder_reply(fake_kernel("accepted 1.5"))] * 3)
    said: list[str] = []
    first = run_sweep(select_problems(PROBLEMS_ROOT, None, NAMES, None, None, 0, False), _config(max_tokens=1),
                      models, db, executor=ScriptedExecutor(), progress=said.append)
    assert first["status"] == "max_tokens" and _statuses(first) == ["done", "not_started", "not_started"]
    assert first["llm_calls"] == 1 and first["metrics"]["all"]["problems"] == 1
    (note,) = [line for line in said if "not started" in line]
    assert note.startswith("sweep budget spent (") and "2 problems not started" in note
    assert f"kernelwright sweep --resume {first['run_id']} --db {db} --max-tokens N" in note

    kept = _sweep(db, models, resume=first["run_id"])  # the stored budget holds: nothing more starts
    assert kept["status"] == "max_tokens" and kept["llm_calls"] == 1
    more = _sweep(db, models, resume=first["run_id"], max_tokens=10**9)
    assert more["status"] == "finished" and _statuses(more) == ["done"] * 3 and more["llm_calls"] == 3
    stored = SweepSpec.from_stored(run_store.get_run(open_store(db), first["run_id"]).config)
    assert stored.sweep.max_tokens == 10**9


def test_a_dollar_budget_holds_for_the_whole_sweep_and_each_run_gets_what_is_left(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call: 200 tokens at $1000 per 1M, $0.20. With $0.30 the second problem starts with $0.10 left."""
    db = f"sqlite:///{tmp_path / 'd.db'}"
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"my-model": {"input": 1000, "output": 1000}}))
    monkeypatch.setenv("LOCAL_KEY", "local-secret")
    reply = coder_reply(fake_kernel("accepted 1.5"))["content"]
    with ScriptedServer([("ok", reply)] * 3) as server:
        models = ModelSpec(model="my-model", base_url=server.url, api_key_env="LOCAL_KEY", prices=str(prices))
        summary = _sweep(db, models, budget_usd=0.3)
    assert summary["status"] == "budget_usd" and _statuses(summary) == ["done", "done", "not_started"]
    assert summary["cost_usd"] == pytest.approx(0.4) and "$0.4000 of $0.3" in summary["problems"][2]["detail"]
    second = RunSpec.model_validate(run_store.get_run(open_store(db), summary["problems"][1]["child_run_id"]).config)
    assert second.optimize.budget_usd == pytest.approx(0.1)


def test_a_dollar_budget_with_an_unpriced_model_is_refused_before_the_sweep(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'u.db'}"
    env = {**os.environ, "LOCAL_KEY": "local-secret"}
    env.pop("KERNELWRIGHT_PRICES", None)
    result = subprocess.run([KERNELWRIGHT, "sweep", "--problem", "ReLU", "--device", "cpu", "--model", "my-vllm",
                             "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "LOCAL_KEY", "--budget-usd", "1",
                             "--db", db], capture_output=True, text=True, timeout=300, env=env)
    message = " ".join(result.stderr.split())
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--budget-usd needs a price for my-vllm" in message and "--prices FILE" in message
    assert runs_list(db) == []  # no sweep was started


def test_patience_reaches_each_problems_optimize_run(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'p.db'}"
    models = _script(tmp_path, [coder_reply(fake_kernel("accepted 1.5")), judge_reply(),
                                coder_reply(fake_kernel("accepted 1.2")), judge_reply(),
                                coder_reply(fake_kernel("accepted 3.0"))])
    problems = select_problems(PROBLEMS_ROOT, None, ["ReLU"], None, None, 0, False)
    summary = run_sweep(problems, _config(rounds=3, patience=1), models, db, executor=ScriptedExecutor())
    (problem,) = summary["problems"]
    child = run_store.get_run(open_store(db), problem["child_run_id"])
    assert RunSpec.model_validate(child.config).optimize.patience == 1
    assert child.status == "converged" and problem["speedup"] == pytest.approx(1.5)  # round 3 never ran
    assert SweepSpec.from_stored(run_store.get_run(open_store(db), summary["run_id"]).config).sweep.optimize.patience == 1


def test_the_sweeps_totals_are_those_of_the_runs_it_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`runs show`, `runs list`, the summary and the report: one query (store.runs.run_spend); an unpriced
    model's cost is unknown there as in each run."""
    db = f"sqlite:///{tmp_path / 't.db'}"
    monkeypatch.setenv("LOCAL_KEY", "local-secret")
    monkeypatch.delenv("KERNELWRIGHT_PRICES", raising=False)
    reply = coder_reply(fake_kernel("accepted 1.5"))["content"]
    with ScriptedServer([("ok", reply)] * 3) as server:
        models = ModelSpec(model="my-vllm-model", base_url=server.url, api_key_env="LOCAL_KEY")
        summary = _sweep(db, models)
    children = [p["child_run_id"] for p in summary["problems"]]
    assert len(set(children)) == 3
    shown = run_details(db, summary["run_id"])
    (listed,) = [r for r in runs_list(db) if r["run_id"] == summary["run_id"]]
    for totals in (summary, shown, listed):
        assert (totals["llm_calls"], totals["prompt_tokens"], totals["completion_tokens"]) == (3, 360, 240)
        assert totals["cost_usd"] is None and totals["unpriced_models"] == ["my-vllm-model"]
    assert all(run_details(db, child)["cost_usd"] is None for child in children)
    _, markdown = write_run_report(db, summary["run_id"], str(tmp_path / "report"))
    assert "3 LLM calls, 600 tokens, cost unknown (no price for my-vllm-model) in its 3 optimize runs" in \
        Path(markdown).read_text()
