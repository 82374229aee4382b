"""The contract between the parent and the child: file names in the scratch folder and the job record."""

from __future__ import annotations

import secrets
from typing import Any, Literal

from pydantic import BaseModel, Field

from harness.policy import EvalPolicy

JOB_FILE = "job.json"
CANDIDATE_FILE = "candidate.py"
PROBLEM_FILE = "problem.py"
INPUTS_FILE = "inputs.pt"
OUTPUTS_FILE = "outputs.pt"
RESULT_FILE = "result.json"
KNOCKOUT_FILE = "knockout.pt"
EVENTS_FILE = "events.jsonl"
LOG_FILE = "child.log"


Mode = Literal["evaluate", "build", "profile"]


def _seed() -> int:
    return secrets.randbits(31)


class ChildJob(BaseModel):
    """Everything the child needs besides the commands it is sent; it reads nothing else from the parent.
    Never a database URL, a path of the store, or a secret (seeds are drawn fresh for every job).

    evaluate: a conversation (load, correctness, knock-out, timing) with the parent; the other modes run alone
    and write their result file. build: import the candidate so its extensions are built into the cache.
    profile: one forward under Nsight Compute. (The baselines, eager and torch.compile, are timed as evaluate
    jobs of reference processes: harness/execution/baseline.py.)"""

    mode: Mode
    device: str  # "cpu", "cuda" or "cuda-compile-only"
    policy: EvalPolicy = Field(default_factory=EvalPolicy)
    init_seed: int = Field(default_factory=_seed)
    # the fresh-input pools of timed calls where the child stages them (CUDA, or a CPU without a cgroup freezer);
    # None where the parent writes every input itself: nothing in the child can derive the next call's values
    pool_seed: int | None = None

    @property
    def hardening(self) -> bool:
        """Runtime integrity checks: only when a verdict depends on them."""
        return self.policy.hardening and self.mode == "evaluate"

    @property
    def conversing(self) -> bool:
        return self.mode == "evaluate"


class ChildResult(BaseModel):
    """What the child reports. Validated in the parent: a malformed report is a crash, never trusted data."""

    status: str
    message: str = ""
    builds: list[dict[str, Any]] = Field(default_factory=list)
    device_info: dict[str, Any] = Field(default_factory=dict)
    integrity: list[str] = Field(default_factory=list)
    threads: dict[str, dict[str, int]] = Field(default_factory=dict)
    # the precision settings (harness/values/precision.py) at the same moments as `threads`, and once loaded
    precision: dict[str, dict[str, str]] = Field(default_factory=dict)
    telemetry: dict[str, dict[str, Any]] = Field(default_factory=dict)
    kernel_calls: dict[str, int] = Field(default_factory=dict)
