"""Speed of light decides: a run stops when its best kernel is within the stated fraction of the device's floor,
or when the last rounds' gain per LLM call falls under a threshold; the report says which rule stopped it."""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from agent.search.stopping import DIMINISHING, SPEED_OF_LIGHT, Stopper
from harness.execution.eval_task import EvalTask
from harness.records import Evaluation
from kernelwright.optimize_service import run_optimize
from store import LLMCallRow, open_store
from sqlalchemy import select
from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel, judge_reply

ROOF = {"floor_ms": 0.5, "bound": "memory", "spec": "CPU (1 thread)", "flops": 1.0, "min_bytes": 2 ** 20}


class RooflineExecutor(ScriptedExecutor):
    """Scripted evaluations with a floor of 0.5 ms against a reference of 1 ms: a 1.8x kernel runs at 90% of it."""

    def submit(self, task: EvalTask) -> "Future[Evaluation]":
        evaluation = super().submit(task).result()
        if evaluation.accepted and evaluation.candidate_ms:
            evaluation.roofline = {**ROOF, "candidate_fraction": ROOF["floor_ms"] / evaluation.candidate_ms}
        done: Future[Evaluation] = Future()
        done.set_result(evaluation)
        return done


def _run(tmp_path: Path, kernels: list[str], **config: object) -> tuple[dict, Path, list]:
    replies = [coder_reply(kernels[0])]
    for kernel in kernels[1:]:
        replies += [judge_reply(), coder_reply(kernel)]
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": replies}))
    db = f"sqlite:///{tmp_path / 'stop.db'}"
    summary = run_optimize("relu", OptimizeConfig(**{"device": "cpu", "patience": 9, **config}),
                           ModelSpec(model=f"scripted:{script}"), db, executor=RooflineExecutor())
    with open_store(db)() as session:
        calls = list(session.scalars(select(LLMCallRow).order_by(LLMCallRow.id)))
    return summary, Path(summary["folder"]) / "report.md", calls


def test_the_run_stops_at_the_speed_of_light_and_the_report_says_so(tmp_path: Path) -> None:
    kernels = [fake_kernel(f"accepted {s}") for s in (1.2, 1.85, 1.9, 1.95)]
    summary, report, calls = _run(tmp_path, kernels, rounds=4)
    assert summary["status"] == SPEED_OF_LIGHT and summary["best"]["speedup"] == 1.85
    text = report.read_text()
    assert "Stopped by speed of light: the best kernel runs at 93% of the device's floor" in text
    assert "Speed of light: the best kernel runs at 93% of the device's floor (0.5 ms, memory-bound" in text
    judge = [c.messages[-1]["content"] for c in calls if c.purpose == "judge"][0]
    assert "the best kernel so far runs at 60% of the device's floor" in judge and "stops at 90%" in judge
    control, _, _ = _run(tmp_path / "off", kernels, rounds=4, sol_target=0)  # off: every round runs
    assert control["status"] == "finished" and control["best"]["speedup"] == 1.95


def test_the_run_stops_when_gain_per_call_falls_under_the_threshold(tmp_path: Path) -> None:
    kernels = [fake_kernel(f"accepted {s}") for s in (1.2, 1.21, 1.22, 1.23, 1.5)]
    summary, report, _ = _run(tmp_path, kernels, rounds=5, gain_window=2, min_gain_per_call=0.01)
    assert summary["status"] == DIMINISHING and summary["best"]["speedup"] == 1.22
    assert "Stopped by diminishing returns: the last 2 rounds took the best from 1.200x to 1.220x over 4 LLM " \
           "calls" in report.read_text()
    finished, report, _ = _run(tmp_path / "steep", [fake_kernel(f"accepted {s}") for s in (1.2, 1.4, 1.6)],
                               rounds=3, gain_window=1, min_gain_per_call=0.01)
    assert finished["status"] == "finished" and "Stopped by the round limit." in report.read_text()


def test_the_stopper_needs_a_full_window_and_a_floor() -> None:
    stopper = Stopper(0.9, 0.01, 2)
    assert stopper.after_round(1.2, {}, 1) is None and stopper.after_round(1.2, {}, 3) is None
    assert stopper.after_round(1.2, {}, 5)[0] == DIMINISHING  # 0% over 4 calls
    assert Stopper(0.9, None, 2).after_round(3.0, {**ROOF, "candidate_fraction": 0.89}, 1) is None
    assert Stopper(0.9, None, 2).after_round(3.0, {**ROOF, "candidate_fraction": 0.9}, 1)[0] == SPEED_OF_LIGHT
