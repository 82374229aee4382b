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
SPOT_CHECKS_FILE = "spot_checks.pt"
EVENTS_FILE = "events.jsonl"
LOG_FILE = "child.log"


class ChildJob(BaseModel):
    """Everything the child needs; it reads nothing else from the parent."""

    device: str  # "cpu", "cuda" or "cuda-compile-only"
    build_cache: str
    init_seed: int
    cpu_threads: int
    warmup_calls: int
    min_timed_calls: int
    max_timed_calls: int
    timing_budget_s: float
    skip_timing: bool
    cuda_arch: str = "sm_90"
    hardening: bool = True
    timing_seed: int = 0
    spot_checks: int = 3
    baseline: bool = False  # time the reference eagerly and under torch.compile, no candidate
    build_only: bool = False  # import (and so build) the candidate, then stop: a sweep's compile workers


class ChildResult(BaseModel):
    """What the child reports. Validated in the parent: a malformed report is a crash, never trusted data."""

    status: str
    message: str = ""
    builds: list[dict[str, Any]] = Field(default_factory=list)
    device_info: dict[str, Any] = Field(default_factory=dict)
    timing: dict[str, list[float]] | None = None
    integrity: list[str] = Field(default_factory=list)
    threads: dict[str, dict[str, int]] = Field(default_factory=dict)
    telemetry: dict[str, dict[str, Any]] = Field(default_factory=dict)
    baseline: dict[str, Any] = Field(default_factory=dict)
