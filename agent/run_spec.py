"""The typed records of what a run is, stored with every run so that `--resume RUN` and `rerun RUN` need nothing
else: an optimize run's RunSpec (its problem, models, endpoint, sampling, budgets, device, policy and the code
that ran it) and a sweep's SweepSpec (what it does, its problems and models). API keys are never stored: only
the name of the variable that holds one."""

from __future__ import annotations

import json
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent.config import OptimizeConfig
from agent.pricing import load_prices
from harness.device import Device
from harness.policy import EvalPolicy

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_MODEL = "gpt-4o"


class ModelSpec(BaseModel):
    """How to reach the coder (and judge) model."""

    model: str | None = Field(None, description=f"A model name (default {DEFAULT_MODEL}), or scripted:FILE.")
    judge_model: str | None = Field(None, description="A different model for the judge (default: the coder).")
    base_url: str | None = Field(None, description="An OpenAI-compatible endpoint (default api.openai.com).")
    api_key_env: str | None = Field(None, description=f"The variable holding the key (default {DEFAULT_API_KEY_ENV}).")
    temperature: float | None = None
    reasoning_effort: str | None = None
    llm_timeout: float | None = Field(None, description="Seconds one call may take (default 600).")
    reply_tokens: int | None = Field(None, description="Cap on one reply's completion tokens.")
    prices: str | None = Field(None, description="A price table: a JSON file's path when given, its content when "
                                                 "stored (so a re-run costs the same).")

    @property
    def coder(self) -> str:
        return self.model or DEFAULT_MODEL

    @property
    def key_variable(self) -> str:
        return self.api_key_env or DEFAULT_API_KEY_ENV

    def frozen(self) -> "ModelSpec":
        """The spec as stored: a price file is replaced by its content, which a later run may not have."""
        if self.prices and Path(self.prices).is_file():
            table = {name: {"input": i, "output": o} for name, (i, o) in load_prices(Path(self.prices)).items()}
            return self.model_copy(update={"prices": json.dumps(table)})
        return self

    def overridden_by(self, given: "ModelSpec") -> "ModelSpec":
        """This spec with every option `given` sets explicitly (not None) taking its place."""
        return self.model_copy(update=given.model_dump(exclude_none=True))


class Execution(BaseModel):
    """Where and how candidates are evaluated: the settings an optimize run and a sweep share."""

    device: Device = Field("auto", description="Where candidates are built, checked and timed (auto: cuda when a "
                                               "GPU is visible, else cpu).")
    workers: int | None = Field(None, ge=1, description="Compile workers (default: cores and memory allow).")
    executor: str = Field("local", description="local, or ray (a local 127.0.0.1 cluster or ray_address).")
    ray_address: str | None = Field(None, description="An existing Ray cluster to evaluate on.")


class ProblemRef(BaseModel):
    key: str
    fingerprint: str = Field(description="sha256 of the problem's source: the run's problem, exactly.")
    path: str | None = None


class RunSpec(BaseModel):
    """Everything needed to run an optimize run again."""

    problem: ProblemRef
    models: ModelSpec = Field(default_factory=ModelSpec)
    optimize: OptimizeConfig = Field(default_factory=OptimizeConfig)
    kernelwright_version: str | None = None
    kernelwright_commit: str | None = None

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> "RunSpec":
        """Runs stored before the spec existed kept only the coder's name under "model"."""
        if "models" not in stored and stored.get("model"):
            stored = {**stored, "models": {"model": stored["model"]}}
        return cls.model_validate(stored)


class SweepConfig(BaseModel):
    """What a sweep does. Stored with the run (in its SweepSpec); `--resume` reads it back."""

    mode: Literal["candidates", "optimize"] = Field("candidates", description="candidates: verify solution files; "
                                                                             "optimize: run the agent.")
    candidates_dir: str | None = Field(None, description="Folder of solutions, matched to problems by key/id/name.")
    device: Device = Field("cpu", description="Where it runs (resolved: `auto` is stored as what it chose).")
    device_requested: Device | None = Field(None, description="The device as asked for (auto, cpu, cuda, ...).")
    device_name: str | None = Field(None, description="The processor or GPU the sweep ran on.")
    shrink: bool = Field(False, description="Problems were rescaled to the CPU budget first (results are on the "
                                            "shrunk sizes, not the benchmark's own).")
    workers: int | None = Field(None, description="Compile workers (default: cores and memory allow).")
    executor: str = Field("local", description="local, or ray (a local 127.0.0.1 cluster or --ray-address).")
    ray_address: str | None = Field(None, description="An existing Ray cluster to run on.")
    policy: EvalPolicy = Field(default_factory=EvalPolicy)
    optimize: OptimizeConfig | None = Field(None, description="Per-problem optimize settings (optimize mode).")
    budget_usd: float | None = Field(None, description="Dollars for the whole sweep (optimize mode): no problem "
                                     "starts once its optimize runs have spent this, and each starts with what is "
                                     "left as its own budget.")
    max_tokens: int | None = Field(None, description="Prompt + completion tokens for the whole sweep (optimize "
                                   "mode), kept as budget_usd is.")
    problem_keys: list[str] = Field(default_factory=list, description="The problems, in order.")
    profile: bool = Field(False, description="Store Nsight Compute metrics of accepted CUDA kernels (candidates "
                          "mode).")
    baselines: bool = Field(False, description="Also time eager PyTorch and torch.compile per problem (once per "
                                               "problem and device fingerprint; reused afterwards).")


class SweepSpec(BaseModel):
    """Everything needed to resume a sweep: what it does, its problems (in order, by fingerprint) and, in optimize
    mode, its models. Stored as the sweep run's config (the same dict as before the type existed)."""

    sweep: SweepConfig
    fingerprints: list[str] = Field(default_factory=list, description="sha256 of each problem's source.")
    models: ModelSpec | None = Field(None, description="The coder and judge (optimize mode; None in candidates mode).")

    @classmethod
    def from_stored(cls, stored: dict[str, Any] | None) -> "SweepSpec":
        return cls.model_validate(stored or {"sweep": {}})


def code_version() -> tuple[str, str | None]:
    """kernelwright's version and, in a git checkout, its commit (with `+dirty` for uncommitted changes)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kernelwright"), _commit()
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown", _commit()


@lru_cache(maxsize=1)
def _commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
