"""The reward of one evaluation.

    reward = 0                                         if the verdict is not `accepted`
    reward = clip(1 + log2(speedup), FLOOR, CEILING)   if accepted

So parity earns 1, each doubling of speed one more point, a correct but slower kernel at least FLOOR (it is
still worth more than a wrong one) and nothing above CEILING (16x), which caps what a timing outlier can earn.
"""

from __future__ import annotations

import math
from typing import Any

FLOOR = 0.1
CEILING = 5.0
FULL = "full"  # EvalPolicy.tier of the whole protocol: the only tier whose numbers are results
ACCEPTED = "accepted"  # Verdict.ACCEPTED.value (harness/records.py): rewards imports nothing of ours


def reward(verdict: str, speedup: float | None) -> float:
    if verdict != ACCEPTED or speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return 0.0
    return min(CEILING, max(FLOOR, 1.0 + math.log2(speedup)))


def reward_of(record: Any) -> float:
    """The reward of a stored evaluation record (a dict from the store or a harness Evaluation). A screening-tier
    record (a ranking among tuning variants, never a result) earns nothing."""
    if isinstance(record, dict):
        if record.get("tier", FULL) != FULL:
            return 0.0
        return reward(str(record.get("verdict")), record.get("speedup"))
    if getattr(record, "tier", FULL) != FULL:
        return 0.0
    return reward(getattr(record.verdict, "value", record.verdict), record.speedup)
