"""Baselines of a problem on a device: eager PyTorch and torch.compile, timed in an isolated child. Measured once
per problem revision and device fingerprint, then reused from the store."""

from __future__ import annotations

import hashlib
import os
import platform
import secrets
import statistics
from typing import Any

from harness import job as J
from harness.policy import EvalPolicy
from harness.reference import run_reference
from harness.sandbox import Limits
from harness.session import run_child
from harness.scratch import read_result, save_inputs, scratch_folder
from kernelbench.problem import Problem

BASELINE_SOURCE = "# baseline measurement: no candidate\n"


def device_key(device: str, threads: int) -> str:
    """What makes timings comparable: the device model, the thread count (CPU) and torch's version."""
    import torch

    if device == "cuda":
        what = f"cuda|{torch.cuda.get_device_name(0)}|{torch.__version__}"
    else:
        what = f"cpu|{platform.processor() or platform.machine()}|{os.cpu_count()}|{threads}|{torch.__version__}"
    return hashlib.sha256(what.encode()).hexdigest()[:16]


def measure_baselines(problem: Problem, device: str, policy: EvalPolicy) -> dict[str, Any]:
    """{"eager_ms", "compile_ms" (medians) or "*_error"} measured in a fresh, isolated process."""
    job = J.ChildJob(device=device, init_seed=secrets.randbits(31), cpu_threads=policy.cpu_threads,
                     warmup_calls=policy.warmup_calls, min_timed_calls=policy.min_timed_calls,
                     max_timed_calls=policy.max_timed_calls, timing_budget_s=policy.timing_budget_s, baseline=True)
    with scratch_folder(problem, BASELINE_SOURCE, job) as scratch:
        save_inputs(scratch, run_reference(problem, device, job.init_seed, [secrets.randbits(31)],
                                            vary_distributions=False))
        limits = Limits(timeout_s=policy.timeout_s, memory_mb=policy.memory_limit_mb,
                        address_space_limit=device == "cpu", cpu_threads=policy.cpu_threads)
        outcome = run_child(scratch, limits)
        result = read_result(scratch)
        if result is None or not result.baseline:
            return {"error": f"the baseline process failed (returncode {outcome.returncode})"}
        record: dict[str, Any] = {k: v for k, v in result.baseline.items() if k.endswith("_error")}
        for name in ("eager", "compile"):
            samples = result.baseline.get(name)
            if samples:
                record[f"{name}_ms"] = statistics.median(samples)
        return record
