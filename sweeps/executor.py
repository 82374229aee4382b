"""Executors run evaluations for a sweep. The local one keeps every core compiling and times one candidate at
a time: on a GPU one timing job per device; on the CPU timing runs alone while compiles wait (a build on the
other core would steal the cycles being measured)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import psutil

from harness import EvalPolicy, Evaluation, evaluate
from harness.prebuild import prebuild
from kernelbench.problem import Problem


@dataclass
class EvalTask:
    key: str  # a label for progress and results, e.g. the problem key
    problem: Problem
    source: str
    device: str
    policy: EvalPolicy


class Executor(Protocol):
    def submit(self, task: EvalTask) -> "Future[Evaluation]":
        ...

    def shutdown(self) -> None:
        ...


class _TimingGate:
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
    def __init__(self, gate: _TimingGate, shared: bool) -> None:
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


def default_workers() -> int:
    """One compile per core, and no more than memory allows: a torch extension compile peaked at 1.44 GB (with
    the precompiled header) and 1.54 GB (without) on GCC 12 -O3; 2 GB each leaves room for the children."""
    memory_gb = psutil.virtual_memory().total / 2**30
    return max(1, min(os.cpu_count() or 1, int(memory_gb // 2)))


class LocalExecutor:
    def __init__(self, workers: int | None = None, device: str = "cpu") -> None:
        self.workers = workers or default_workers()
        self.pool = ThreadPoolExecutor(max_workers=self.workers)
        self.gate = _TimingGate(exclusive_with_compiles=device == "cpu")

    def submit(self, task: EvalTask) -> "Future[Evaluation]":
        return self.pool.submit(self._run, task)

    def _run(self, task: EvalTask) -> Evaluation:
        with self.gate.compile():
            prebuild(task.problem, task.source, task.device, task.policy)
        with self.gate.time():
            return evaluate(task.problem, task.source, task.device, task.policy)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
