"""An executor with scripted evaluations, so loop, resume and budget tests run in milliseconds. A candidate says
what it should get in a comment: `# fake: accepted 1.5`, `# fake: incorrect`, `# fake: compile_error`.
Like the real executors, it runs each submission in its own worker thread and holds a timing gate, and it
records every timed interval so tests can prove no two overlapped."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from harness.pipeline import candidate_hash
from harness.execution.eval_task import EvalTask
from harness.execution.executor import TimingGate
from harness.records import Evaluation, TimingStats, Verdict

_MARK = re.compile(r"#\s*fake:\s*(\w+)(?:\s+([0-9.]+))?")


def fake_kernel(mark: str, body: str = "") -> str:
    """A ModelNew file whose scripted evaluation is `mark` (e.g. "accepted 2.0")."""
    return f"# fake: {mark}\nimport torch\n{body}\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def coder_reply(source: str) -> dict[str, str]:
    return {"purpose": "coder", "content": f"```python\n{source}```"}


def judge_reply(change: str = "tile it") -> dict[str, str]:
    return {"purpose": "judge", "content": f'{{"diagnosis": "scripted", "change": "{change}"}}'}


def scripted_evaluation(task: EvalTask) -> Evaluation:
    match = _MARK.search(task.source)
    verdict, speedup = (match.group(1), float(match.group(2) or 1.0)) if match else ("compile_error", None)
    evaluation = Evaluation(verdict=Verdict(verdict), problem_name=task.problem.name,
                            problem_fingerprint=task.problem.fingerprint, candidate_hash=candidate_hash(task.source),
                            device=task.device, policy=task.policy.model_dump(),
                            reasons=[] if verdict == "accepted" else [f"[scripted] {verdict}"])
    if verdict == "accepted":
        ref, candidate = 1.0, 1.0 / (speedup or 1.0)
        evaluation.ref_timing = TimingStats(samples_ms=[ref], median_ms=ref, p25_ms=ref, p75_ms=ref)
        evaluation.candidate_timing = TimingStats(samples_ms=[candidate], median_ms=candidate, p25_ms=candidate,
                                                  p75_ms=candidate)
        evaluation.speedup = speedup
    evaluation.phase_seconds["total"] = 0.0
    return evaluation


class ScriptedExecutor:
    def __init__(self, workers: int = 4, build_s: float = 0.0, time_s: float = 0.0, gated: bool = True,
                 device: str = "cpu") -> None:
        self.pool = ThreadPoolExecutor(workers)
        self.gate = TimingGate(exclusive_with_compiles=device == "cpu")
        self.build_s, self.time_s, self.gated = build_s, time_s, gated
        self.submitted: list[EvalTask] = []
        self.profiled: list[tuple[EvalTask, list[str]]] = []
        self.timed: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def submit(self, task: EvalTask) -> "Future[Evaluation]":
        with self.lock:
            self.submitted.append(task)
        return self.pool.submit(self._run, task)

    def _run(self, task: EvalTask) -> Evaluation:
        with self.gate.compile():
            time.sleep(self.build_s)
        if self.gated:
            with self.gate.time():
                return self._timed(task)
        return self._timed(task)

    def _timed(self, task: EvalTask) -> Evaluation:
        began = time.perf_counter()
        time.sleep(self.time_s)
        with self.lock:
            self.timed.append((began, time.perf_counter()))
        evaluation = scripted_evaluation(task)
        if self.build_s:  # like the local executor's separate build step
            evaluation.phase_seconds["prebuild"] = self.build_s
        return evaluation

    def profile(self, task: EvalTask, kernels: list[str]) -> "Future[dict[str, Any]]":
        self.profiled.append((task, kernels))
        done: Future[dict[str, Any]] = Future()
        done.set_result({"ncu": [{"kernel": "fake", "dram__throughput.avg.pct_of_peak_sustained_elapsed": 50.0}]})
        return done

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True)


def overlapping(intervals: list[tuple[float, float]]) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    ordered = sorted(intervals)
    return [(a, b) for a, b in zip(ordered, ordered[1:]) if b[0] < a[1]]
