"""Baselines of a problem on a device: eager PyTorch and torch.compile, timed in an isolated child. Measured once
per problem revision and device fingerprint, then reused from the store."""

from __future__ import annotations

import hashlib
import os
import platform
import statistics
from typing import Any

from harness.child.child_run import run_in_child
from harness.isolation.timing_slot import timing_slot
from harness.policy import EvalPolicy
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
    """{"eager_ms", "compile_ms" (medians) or "*_error"} measured in a fresh, isolated process, holding the device's
    timing slot (its timings must not share the device with another measurement or, on the CPU, a compile)."""
    with timing_slot(device):
        run = run_in_child(problem, BASELINE_SOURCE, "baseline", device, policy)
    result = run.result
    if result is None or not result.baseline:
        return {"error": f"the baseline process failed (returncode {run.outcome.returncode})"}
    record: dict[str, Any] = {k: v for k, v in result.baseline.items() if k.endswith("_error")}
    for name in ("eager", "compile"):
        samples = result.baseline.get(name)
        if samples:
            record[f"{name}_ms"] = statistics.median(samples)
    return record
