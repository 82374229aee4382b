"""What a run produces: one outcome per round and slot, and the run's result (shared by the loop and the
recorder, so neither imports the other)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.prompts import Attempt
from harness.records import Evaluation


@dataclass
class Outcome:
    """One slot of one round: a parsed and evaluated candidate, or why there is none."""

    round: int
    slot: int
    attempt: Attempt
    evaluation: Evaluation | None = None
    path: str | None = None
    repair: int = 0  # 0: the round's own candidate; n: its n-th direct fix after a failed build or run
    tuned: str = ""  # a tuning winner (agent/search/tuning.py): its pinned values, e.g. "BLOCK=64"


@dataclass
class RunResult:
    status: str
    best: Outcome | None
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    message: str | None = None  # why a `failed` or `no_kernel` run stopped
    notes: list[str] = field(default_factory=list)  # what the report should say besides the table (a judge
    # reply that could not be parsed, say)
    stopped_by: str = ""  # the rule that ended the run, in words (agent/search/stopping.py)
