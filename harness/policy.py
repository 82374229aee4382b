"""Knobs of one evaluation. Defaults are what the agent and `kernelwright eval` use."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, Field, field_validator

# the environment variable that allows static_policy='off': set by tests/conftest.py, never by a user
STATIC_OFF_SWITCH = "KERNELWRIGHT_TEST_STATIC_OFF"


Tier = Literal["full", "screening"]


class EvalPolicy(BaseModel):
    """How hard to check and how long to measure."""

    tier: Tier = Field("full", description="full: the whole protocol, for anything reported, stored as a result, "
                       "rewarded, exported or gated; screening: build, correctness on the trials and a short timing "
                       "in one process pair, for ranking variants and population members only (see screening()): "
                       "its numbers never reach the store's results, a report, a reward or the gate.")

    trials: int = Field(8, ge=1, description="Correctness trials, each with a fresh secret seed and input set; "
                        "trial k draws from distribution k mod 8 (default, uniform, heavy-tailed, spiky, large, "
                        "block-scaled, sorted ramp, sparse spikes).")
    atol_fp32: float = Field(1e-4, description="Absolute tolerance for float32 outputs (rtol is the same).")
    atol_half: float = Field(1e-2, description="Absolute tolerance for float16/bfloat16 outputs.")
    static_policy: Literal["strict", "default", "off"] = Field(
        "default", description="strict: forward's compute must all be the candidate's kernels; default: library "
        "compute allowed but reported; off: only syntax/ModelNew/kernel presence, a test-only switch (it needs "
        f"{STATIC_OFF_SWITCH}=1, which the test suite sets) for proving the runtime contains what the static "
        "policy would have stopped.")

    @field_validator("static_policy")
    @classmethod
    def _off_only_in_tests(cls, value: str) -> str:
        if value == "off" and os.environ.get(STATIC_OFF_SWITCH) != "1":
            raise ValueError(f"static_policy 'off' is a test-only switch ({STATIC_OFF_SWITCH}=1): use strict or "
                             "default")
        return value
    require_custom_kernel: bool = Field(
        True, description="Reject candidates that never build a kernel of their own (load_inline / load).")
    min_kernel_share: float = Field(
        0.05, ge=0.0, lt=1.0, description="The candidate's kernels' least share of forward's time (CPU, clocked) and "
        "of the reference's work (FLOPs) under which no speedup is credited (`[runtime-compute]`): under it the "
        "speedup measured is PyTorch's. Only this floor: a candidate that builds no kernel is still refused while "
        "require_custom_kernel holds. Whole-model judging lowers it (regions/verify.py: a region is a small part of "
        "a model by design, and the rest of forward is the reference's own code on both sides).")
    warmup_calls: int = Field(3, ge=1, description="Untimed calls of each model before timing.")
    min_timed_calls: int = Field(10, ge=3, description="Fewest timed batches per model.")
    max_timed_calls: int = Field(1000, ge=3, description="Most timed calls per model.")
    timing_budget_s: float = Field(1.0, gt=0, description="Most time spent timing each model.")
    timing_precision: float = Field(0.01, ge=0, description="Time only as many batches as a ±this-fraction 95% "
                                    "interval of the speedup needs, as a discarded pilot of min_timed_calls "
                                    "batches predicts (timing_budget_s still caps it); 0: always the budget.")
    timeout_s: float = Field(300.0, gt=0, description="Run clock of the candidate's process: import, checks and "
                             "timing; time spent building its extensions is not on it.")
    build_timeout_s: float = Field(900.0, gt=0, description="Wall clock of each extension build (a slow nvcc "
                                   "under load is a compile error with this reason, never a `timeout`).")
    max_builds: int = Field(8, ge=1, description="Most distinct extension builds one evaluation may request (cached "
                            "ones included): past it every build is refused and the verdict says so.")
    build_budget_s: float = Field(1800.0, gt=0, description="Most wall time all of one evaluation's builds may take "
                                  "together (the run clock pauses while building, so this is what bounds them).")
    build_output_mb: int = Field(256, ge=16, description="What one extension build may write (its work folder, "
                                 "any one file stopped by the kernel past it): over it, the build is a compile error.")
    build_cache_mb: int = Field(8192, ge=64, description="The build cache's entries together: past it, after a new "
                                "build, the entries used longest ago are evicted (never the running evaluation's, nor "
                                "one used in the last 30 minutes).")
    scratch_limit_mb: int = Field(1024, ge=16, description="What the candidate may write to its scratch folder, "
                                  "enforced by the kernel (a tmpfs of this size, where kernelwright runs as root).")
    memory_limit_mb: int = Field(8192, ge=256, description="Memory limit of the candidate's process tree.")
    cpu_threads: int = Field(1, ge=1, description="Threads for reference and candidate on the CPU device.")
    cuda_arch: str = Field("sm_90", description="Target of compile-only CUDA builds (sm_90: H100/H200).")
    hardening: bool = Field(True, description="Runtime integrity checks: mutation, aliasing, work after return, "
                            "checks of timed outputs, identity checks.")
    timed_checks: int = Field(300, ge=0, description="The fewest timed calls per model (where they fit in 5x "
                              "timing_budget_s): every timed call's output is probed at 16 secret positions "
                              "against the reference's own timing process (same fresh inputs), so 300 catch a 1% "
                              "cache-hit rate with 95% probability.")
    timed_full_checks: int = Field(20, ge=0, description="Of the checked calls, how many (at random) also have "
                                   "their whole output compared with the parent's own reference (at most 512 MB "
                                   "of outputs, at least 2 calls); a call whose probed values differ always is.")
    batch_target_ms: float = Field(5.0, gt=0, description="Timed calls run in batches of about this length, so "
                                   "the parent's pipe round trip is small against the work it clocks.")
    knockout: bool = Field(True, description="Re-run one trial with the candidate's kernel functions poisoned: "
                           "an unchanged correct answer means forward never depended on its kernel.")
    implausible_speedup: float = Field(10.0, gt=1, description="Speedups above this are re-measured in a fresh "
                                       "process before they are believed.")
    noise_floor: bool = Field(True, description="Time a second reference process in the same rotation (A/A): the "
                              "speedup's interval is widened by how far two identical processes disagree, and a "
                              "speedup counts only where that interval clears 1.")
    process_pairs: int = Field(3, ge=1, le=8, description="Independent sets of timed processes (reference, "
                               "candidate and, with noise_floor, the reference's copy: fresh processes, fresh "
                               "allocations) the timing budget is split across, as pyperf spreads a benchmark over "
                               "worker processes; the interval then holds what a rerun prints, not only what one set's "
                               "batches say (harness/measurement/noise.py rerun_interval). 1: one set, as before.")
    skip_timing: bool = Field(False, description="Decide correctness only (no speedup).")
    envelope: bool = Field(True, description="Also check correctness at variants of the problem's own sizes (odd "
                           "sizes, non-multiples of 8/32/128, a smaller and a larger batch) and time the candidate at "
                           "a few (harness/shipping/envelope.py); off for sweeps that only want KernelBench's number.")
    oracle_multiple: float | None = Field(None, gt=1, description="How many times the reference's own error "
                                          "against a float64 run of the reference a candidate may have before it "
                                          "is `incorrect` (`[oracle]`); None: the output dtype's measured factor "
                                          "(float32 8x, float16/bfloat16 2x, over a floor near the dtype's "
                                          "rounding: harness/verification/oracle.py, docs/verdicts.md).")

    def screening(self) -> "EvalPolicy":
        """This policy's screening tier: the same correctness trials and tolerances, one process pair timed
        briefly, no noise floor, no audits among the timed calls (knock-out, probes), no envelope, no re-measure.
        Cheap enough to rank a tuning sweep; a winner goes through the full protocol before anything reports it."""
        return self.model_copy(update={
            "tier": "screening", "process_pairs": 1, "noise_floor": False, "knockout": False, "timed_checks": 0,
            "timed_full_checks": 0, "envelope": False, "timing_budget_s": min(self.timing_budget_s, 0.3),
            "min_timed_calls": min(self.min_timed_calls, 5), "timing_precision": 0.05})
