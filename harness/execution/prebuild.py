"""Build a candidate's extensions into the shared cache without checking or timing it: lets a pool of compile
workers run ahead of the one timing slot. The later `evaluate()` then imports the finished build."""

from __future__ import annotations

import time

from harness.child.child_run import run_in_child
from harness.policy import EvalPolicy
from harness.verification.static_check import check_candidate
from kernelbench.problem import Problem


def prebuild(problem: Problem, source: str, device: str, policy: EvalPolicy) -> dict[str, object]:
    """{"status": built | skipped | failed, "seconds": ...}. Failures are left for `evaluate()` to report."""
    started = time.perf_counter()
    if check_candidate(source, policy).verdict:
        return {"status": "skipped", "seconds": 0.0}  # evaluate() rejects it without building anything
    run = run_in_child(problem, source, "build", device, policy)
    ok = run.result is not None and run.result.status == "ok" and not run.outcome.timed_out
    return {"status": "built" if ok else "failed", "seconds": time.perf_counter() - started}
