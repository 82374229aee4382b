"""The one way a candidate's process is set up: a job (mode, device, policy), a scratch folder with the problem,
the candidate and reference inputs, the limits, and the parent-owned build service. `run_in_child` runs the
modes that need no conversation (build, profile) to completion; `evaluate()` converses with an
`evaluate` job through the same pieces."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.compilation.build_service import BuildService
from harness.child import job as J
from harness.child.scratch import read_result, save_inputs, scratch_folder
from harness.isolation.sandbox import ChildOutcome, Limits
from harness.isolation.session import run_child
from harness.isolation.timing_slot import timing_cpus
from harness.paths import build_cache_dir
from harness.policy import EvalPolicy
from harness.verification.reference import run_reference
from kernelbench.problem import Problem


def limits_for(device: str, policy: EvalPolicy, timeout_scale: float = 1.0) -> Limits:
    return Limits(timeout_s=policy.timeout_s * timeout_scale, memory_mb=policy.memory_limit_mb,
                  address_space_limit=device == "cpu", cpu_threads=policy.cpu_threads,
                  cpus=timing_cpus(policy.cpu_threads) if device == "cpu" else None, gpu=device == "cuda")


def forkable(device: str) -> bool:
    """Children that the zygote may fork: those that never initialise CUDA (see harness/isolation/zygote.py)."""
    return device != "cuda"


def build_service(device: str, policy: EvalPolicy) -> BuildService:
    mode = f"nvcc-compile-only-{policy.cuda_arch}" if device == "cuda-compile-only" else "native"
    limits = Limits(timeout_s=policy.build_timeout_s, memory_mb=policy.memory_limit_mb, address_space_limit=False)
    return BuildService(build_cache_dir(), mode, limits,
                        extra_cuda_cflags=["-Xptxas", "-v"] if device == "cuda" else None, cuda_arch=policy.cuda_arch,
                        max_builds=policy.max_builds, budget_s=policy.build_budget_s,
                        output_mb=policy.build_output_mb, cache_mb=policy.build_cache_mb)


@dataclass
class ChildRun:
    outcome: ChildOutcome
    result: J.ChildResult | None
    collected: Any = None  # what `collect` read from the scratch folder before it was removed


def run_in_child(problem: Problem, source: str, mode: J.Mode, device: str, policy: EvalPolicy, *,
                 prefix: list[str] | None = None, limits: Limits | None = None,
                 collect: Callable[[Path], Any] | None = None) -> ChildRun:
    """One fresh, jailed child for `mode` on one trial's inputs, run to completion."""
    job = J.ChildJob(mode=mode, device=device, policy=policy)
    assert not job.conversing, "evaluate jobs converse with the parent: see harness/gathering/conversation.py"
    with scratch_folder(problem, source, job) as scratch:
        save_inputs(scratch, run_reference(problem, device, job.init_seed, [secrets.randbits(31)],
                                            policy.cpu_threads, vary_distributions=False))
        outcome = run_child(scratch, limits or limits_for(device, policy), prefix=prefix,
                            on_build=build_service(device, policy),
                            role=mode, forkable=forkable(device))
        return ChildRun(outcome, read_result(scratch), collect(scratch) if collect else None)
