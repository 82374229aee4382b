"""An executor that runs the real harness (`harness.evaluate`) in a worker thread: for the few agent tests that need
a real build's failure (its compiler output) rather than a scripted verdict."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from harness.pipeline import evaluate
from harness.execution.eval_task import EvalTask
from harness.records import Evaluation


class EvaluatingExecutor:
    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(1)
        self.submitted: list[EvalTask] = []

    def submit(self, task: EvalTask) -> "Future[Evaluation]":
        self.submitted.append(task)
        return self.pool.submit(evaluate, task.problem, task.source, task.device, task.policy)

    def profile(self, task: EvalTask, kernels: list[str]) -> "Future[dict[str, Any]]":
        done: Future[dict[str, Any]] = Future()
        done.set_result({"error": "no profiling in tests"})
        return done

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True)
