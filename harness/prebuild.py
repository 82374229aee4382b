"""Build a candidate's extensions into the shared cache without checking or timing it: lets a pool of compile
workers run ahead of the one timing slot. The later `evaluate()` then imports the finished build."""

from __future__ import annotations

import secrets
import time

from harness import job as J
from harness.evaluate import build_service, limits_for
from harness.policy import EvalPolicy
from harness.reference import run_reference
from harness.scratch import read_result, save_inputs, scratch_folder
from harness.session import run_child
from harness.static_check import check_candidate
from kernelbench.problem import Problem


def prebuild(problem: Problem, source: str, device: str, policy: EvalPolicy) -> dict[str, object]:
    """{"status": built | skipped | failed, "seconds": ...}. Failures are left for `evaluate()` to report."""
    started = time.perf_counter()
    if check_candidate(source, policy).verdict:
        return {"status": "skipped", "seconds": 0.0}  # evaluate() rejects it without building anything
    job = J.ChildJob(device=device, init_seed=secrets.randbits(31), cpu_threads=policy.cpu_threads)
    with scratch_folder(problem, source, job) as scratch:
        save_inputs(scratch, run_reference(problem, device, job.init_seed, [secrets.randbits(31)],
                                            vary_distributions=False))
        outcome = run_child(scratch, limits_for(device, policy), on_build=build_service(device, policy))
        result = read_result(scratch)
        ok = result is not None and result.status == "ok" and not outcome.timed_out
        return {"status": "built" if ok else "failed", "seconds": time.perf_counter() - started}
