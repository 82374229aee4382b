"""What every executor shares: the task (one candidate for one problem on one device), the protocol, and the
steps they run. Executors only *return* evaluations: the caller is the only writer to the store."""

from __future__ import annotations

import os
import socket
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from harness.device import Device
from harness.policy import EvalPolicy
from harness.records import Evaluation
from kernelbench.problem import Problem


@dataclass
class EvalTask:
    key: str  # a label for progress and results, e.g. the problem key
    problem: Problem
    source: str
    device: Device
    policy: EvalPolicy


class Executor(Protocol):
    def submit(self, task: EvalTask) -> "Future[Evaluation]":
        """Build, check and time one candidate."""
        ...

    def profile(self, task: EvalTask, kernels: list[str]) -> "Future[dict[str, Any]]":
        """Nsight Compute records of an accepted GPU candidate's kernels ({"error": ...} when not possible)."""
        ...

    def shutdown(self) -> None:
        ...


class ExecutorUnavailable(ValueError):
    """The executor asked for cannot run here; the message says what to do."""


def run_profile(task: EvalTask, kernels: list[str]) -> dict[str, Any]:
    if task.device != "cuda":
        return {"error": f"profiling needs a GPU; this candidate ran on {task.device}"}
    from harness.execution.profile import profile_candidate

    return profile_candidate(task.problem, task.source, kernels, task.policy)


def with_prebuild(evaluation: Evaluation, built: dict[str, Any], executor: dict[str, Any]) -> Evaluation:
    """Where the evaluation ran, and its separate build step's seconds (its own time, not the time it queued)."""
    if built.get("seconds"):
        evaluation.phase_seconds["prebuild"] = float(built["seconds"])
    evaluation.isolation["executor"] = {**executor, "pid": os.getpid(), "host": socket.gethostname()}
    return evaluation


def build_seconds(evaluation: Evaluation) -> float:
    """What its builds cost: the executor's separate build step, or the builds served during the evaluation
    (a cache hit costs a hash)."""
    return evaluation.phase_seconds.get("prebuild", 0.0) + sum(
        b.get("seconds", 0.0) for b in evaluation.build.get("builds", []) if not b.get("cache_hit"))


def own_seconds(evaluation: Evaluation) -> float:
    """What one evaluation cost: its separate build step plus its checks and timing, queueing excluded."""
    return evaluation.phase_seconds.get("prebuild", 0.0) + evaluation.phase_seconds.get("total", 0.0)
