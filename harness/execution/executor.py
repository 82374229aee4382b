"""Executors run the harness pipeline for the agent and for sweeps: builds in parallel, one timed candidate at
a time per device. On a GPU one timing job per device while compiles go on; on the CPU builds are frozen while a
candidate is measured (a build on the other core would steal the cycles being measured), or, where cgroups cannot
freeze, timing runs alone while compiles wait. The judged candidate's
profile (Nsight Compute) is a job of the same pipeline, under the same gate."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from harness.compilation.compile_slots import default_workers
from harness.compilation.pch import expect_many_builds
from harness.pipeline import evaluate
from harness.execution.eval_task import EvalTask, Executor, ExecutorUnavailable, run_profile, with_prebuild
from harness.execution.prebuild import prebuild
from harness.isolation.cgroups import builds_freezable
from harness.records import Evaluation


def open_executor(kind: str, device: str, workers: int | None = None, ray_address: str | None = None) -> Executor:
    """`local` (a thread pool here) or `ray` (a local 127.0.0.1 cluster, or the cluster at `ray_address`)."""
    if kind == "ray":
        from harness.execution.ray_executor import RayExecutor

        return RayExecutor(ray_address, device, workers)
    if kind != "local":
        raise ExecutorUnavailable(f"executor {kind!r}: choose local or ray")
    return LocalExecutor(workers, device)


class TimingGate:
    """Compiles share; timing is exclusive and waits for running compiles (writer-preferring RW lock)."""

    def __init__(self, exclusive_with_compiles: bool) -> None:
        self.exclusive = exclusive_with_compiles
        self.condition = threading.Condition()
        self.compiling = 0
        self.timing = False
        self.waiting_timers = 0

    def compile(self) -> "_Section":
        return _Section(self, shared=True)

    def time(self) -> "_Section":
        return _Section(self, shared=False)


class _Section:
    def __init__(self, gate: TimingGate, shared: bool) -> None:
        self.gate, self.shared = gate, shared

    def __enter__(self) -> None:
        gate = self.gate
        with gate.condition:
            if self.shared:
                gate.condition.wait_for(lambda: not gate.exclusive or (not gate.timing and not gate.waiting_timers))
                gate.compiling += 1
            else:
                gate.waiting_timers += 1
                gate.condition.wait_for(lambda: not gate.timing and (not gate.exclusive or gate.compiling == 0))
                gate.waiting_timers -= 1
                gate.timing = True

    def __exit__(self, *exc: object) -> None:
        gate = self.gate
        with gate.condition:
            if self.shared:
                gate.compiling -= 1
            else:
                gate.timing = False
            gate.condition.notify_all()


class LocalExecutor:
    """A thread pool on this machine. With more than one worker each task is first built (in parallel, in the
    shared cache) and then evaluated under the timing gate, so a build never runs inside a timing slot (where
    it would hold every other compile back); one worker skips the separate build step."""

    def __init__(self, workers: int | None = None, device: str = "cpu") -> None:
        self.workers = workers or default_workers(device)
        expect_many_builds()  # sweeps, agent runs and gates: a precompiled header from the first cold build
        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="kernelwright-eval")
        # where builds can be frozen, a CPU timing freezes them (isolation/timing_slot.py) rather than wait for them
        self.gate = TimingGate(exclusive_with_compiles=device == "cpu" and not builds_freezable())

    def submit(self, task: EvalTask) -> "Future[Evaluation]":
        return self.pool.submit(self._run, task)

    def profile(self, task: EvalTask, kernels: list[str]) -> "Future[dict[str, Any]]":
        return self.pool.submit(self._profile, task, kernels)

    def _run(self, task: EvalTask) -> Evaluation:
        built: dict[str, Any] = {}
        if self.workers > 1:
            with self.gate.compile():
                built = prebuild(task.problem, task.source, task.device, task.policy)
        with self.gate.time():
            return with_prebuild(evaluate(task.problem, task.source, task.device, task.policy), built,
                                 {"kind": "local", "workers": self.workers})

    def _profile(self, task: EvalTask, kernels: list[str]) -> dict[str, Any]:
        with self.gate.time():
            return run_profile(task, kernels)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
