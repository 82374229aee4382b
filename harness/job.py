"""The contract between the parent and the child: file names in the scratch folder and the job record."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

JOB_FILE = "job.json"
CANDIDATE_FILE = "candidate.py"
PROBLEM_FILE = "problem.py"
INPUTS_FILE = "inputs.pt"
OUTPUTS_FILE = "outputs.pt"
RESULT_FILE = "result.json"
KNOCKOUT_FILE = "knockout.pt"
EVENTS_FILE = "events.jsonl"
LOG_FILE = "child.log"


class ChildJob(BaseModel):
    """Everything the child needs besides the commands it is sent; it reads nothing else from the parent.
    Never a database URL, a path of the store, or a secret."""

    device: str  # "cpu", "cuda" or "cuda-compile-only"
    init_seed: int
    cpu_threads: int
    hardening: bool = True
    pool_seed: int = 0  # the fresh-input pools of timed calls (harness/fresh_inputs.py)
    cuda_arch: str = "sm_90"
    # baselines only (eager and torch.compile timed in the child: no candidate code is involved)
    baseline: bool = False
    warmup_calls: int = 3
    min_timed_calls: int = 10
    max_timed_calls: int = 1000
    timing_budget_s: float = 1.0


class ChildResult(BaseModel):
    """What the child reports. Validated in the parent: a malformed report is a crash, never trusted data."""

    status: str
    message: str = ""
    builds: list[dict[str, Any]] = Field(default_factory=list)
    device_info: dict[str, Any] = Field(default_factory=dict)
    integrity: list[str] = Field(default_factory=list)
    threads: dict[str, dict[str, int]] = Field(default_factory=dict)
    telemetry: dict[str, dict[str, Any]] = Field(default_factory=dict)
    baseline: dict[str, Any] = Field(default_factory=dict)
    kernel_calls: dict[str, int] = Field(default_factory=dict)
