"""Build a candidate's extensions into the shared cache without checking or timing it: lets a pool of compile
workers run ahead of the one timing slot. The later `evaluate()` then imports the finished build."""

from __future__ import annotations

import secrets
import time

from harness import job as J
from harness.paths import build_cache_dir
from harness.policy import EvalPolicy
from harness.sandbox import Limits, run_child
from harness.scratch import read_result, scratch_folder
from harness.static_check import check_candidate
from kernelbench.problem import Problem


def prebuild(problem: Problem, source: str, device: str, policy: EvalPolicy) -> dict[str, object]:
    """{"status": built | skipped | failed, "seconds": ...}. Failures are left for `evaluate()` to report."""
    started = time.perf_counter()
    if check_candidate(source, policy).verdict:
        return {"status": "skipped", "seconds": 0.0}  # evaluate() rejects it without building anything
    job = J.ChildJob(device=device, build_cache=str(build_cache_dir()), init_seed=secrets.randbits(31),
                     cpu_threads=policy.cpu_threads, warmup_calls=1, min_timed_calls=3, max_timed_calls=3,
                     timing_budget_s=0.1, skip_timing=True, build_only=True)
    with scratch_folder(problem, source, job) as scratch:
        limits = Limits(timeout_s=policy.timeout_s, memory_mb=policy.memory_limit_mb,
                        address_space_limit=device == "cpu", cpu_threads=policy.cpu_threads)
        outcome = run_child(scratch, limits)
        result = read_result(scratch)
        ok = result is not None and result.status == "ok" and not outcome.timed_out
        return {"status": "built" if ok else "failed", "seconds": time.perf_counter() - started}
