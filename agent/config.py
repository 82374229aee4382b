"""Configuration of one optimize run. Stored whole with the run, so a run can be resumed and re-read exactly."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from agent.search.tuning import TuneBudget

from harness.device import Device
from harness.policy import EvalPolicy


class OptimizeConfig(BaseModel):
    """What an `optimize` run may do and spend."""

    device: Device = Field("cpu", description="cpu or cuda: where candidates are built, checked and timed.")
    rounds: int = Field(4, ge=1, description="Rounds, the seed round included.")
    candidates: int = Field(1, ge=1, description="Candidates per round (best-of-N): written concurrently, built in "
                                                          "parallel, timed one at a time.")
    patience: int = Field(2, ge=1, description="Stop after this many rounds without a faster accepted kernel.")
    max_tokens: int | None = Field(None, description="Stop when prompt + completion tokens reach this.")
    budget_usd: float | None = Field(None, description="Stop when the LLM spend reaches this.")
    time_limit_s: float | None = Field(None, description="Stop starting new rounds after this many seconds.")
    exemplars: int = Field(3, ge=0, description="Earlier accepted kernels (distinct speed buckets) per prompt.")
    reply_tokens: int | None = Field(None, description="Cap on one reply's completion tokens.")
    profile: bool = Field(True, description="Profile accepted GPU kernels with Nsight Compute for the judge.")
    workers: int | None = Field(None, ge=1, description="Compile workers (default: as many as cores and memory "
                                                       "allow); candidates are still timed one at a time.")
    executor: str = Field("local", description="local, or ray (a local 127.0.0.1 cluster or ray_address).")
    ray_address: str | None = Field(None, description="An existing Ray cluster to evaluate on.")
    repair_attempts: int = Field(2, ge=0, description="Direct fixes per candidate whose build or run failed "
                                 "(compile_error, runtime_error): the coder gets its kernel and the error back, "
                                 "before the judge is asked; 0 sends every failure to the judge.")
    stop_at_first_accepted: bool = Field(False, description="End the run (status first_accepted) after the first "
                                         "round that yields an accepted kernel: for a correct kernel, not the "
                                         "fastest.")
    diverse_first_round: bool = Field(True, description="With several candidates, the first round's coder calls "
                                      "each get a different direction to try (slot 1 none): a spread of "
                                      "approaches rather than N samples of one.")
    contract: Literal["auto", "file", "kernel"] = Field("auto", description="What the coder writes: file (the whole "
                                                      "Python file), kernel (only the C++ op; the harness writes "
                                                      "the ModelNew around it from the problem), or auto (file, "
                                                      "then kernel after two replies in a row without a file).")
    max_llm_failures: int = Field(3, ge=1, description="Stop the run (status failed) after this many LLM calls "
                                                       "in a row fail.")
    tune_budget: str = Field("8", description="Tuning of kernels that declare TUNE (agent/search/tunables.py): "
                             "at most this many variants screened per kernel (8), or this many seconds (60s); 0 "
                             "turns it off. No LLM call per variant; the winner is evaluated in full.")
    search: Literal["greedy", "population"] = Field("greedy", description="greedy: every slot starts from the "
                                                    "run's best kernel; population: an archive of accepted kernels "
                                                    "kept diverse by approach, a round's slots spread over the best "
                                                    "and the different, and a combine move (agent/search/"
                                                    "population.py).")
    sol_target: float | None = Field(0.9, ge=0, description="Stop (status speed_of_light) once the best kernel "
                                     "runs at this fraction of the device's roofline floor (0.9: within 10%); 0 "
                                     "or None: off.")
    min_gain_per_call: float | None = Field(0.005, ge=0, description="Stop (status diminishing_returns) once the "
                                            "best speedup's relative gain per LLM call over the last gain_window "
                                            "rounds falls under this (0.005: half a percent a call); 0 or None: off.")
    gain_window: int = Field(3, ge=1, description="Rounds the gain per call is measured over.")
    policy: EvalPolicy = Field(default_factory=EvalPolicy, description="How candidates are judged.")

    @field_validator("tune_budget")
    @classmethod
    def _budget(cls, value: str) -> str:
        TuneBudget.parse(value)
        return value
