"""The reward of one evaluation, under a definition chosen by name (REWARDS); every export says which it used.

    reward = 0                                   if the verdict is not `accepted`
    interval (the default):
    reward = clip(1 + log2(low), FLOOR, CEILING)   low: the lower bound of the speedup's 95% interval
    reward = min(1, that)                          where the harness says the speedup is not significant (its
                                                   interval, widened by the A/A noise floor, holds 1)
    reward = min(1, clip(1 + log2(speedup), ...))  where there is no interval
    point (the definition before intervals):
    reward = clip(1 + log2(speedup), FLOOR, CEILING)

So parity earns 1, each doubling of speed one more point, a correct but slower kernel at least FLOOR (it is still
worth more than a wrong one) and nothing above CEILING (16x). Under `interval` a speedup earns only what its
interval guarantees: 1.32x with an interval of 0.78-1.97x earns 0.64 (its lower bound is slower than parity),
where `point` paid it 1.40 for noise; a speedup without an interval, or one the harness did not find significant,
earns no more than parity.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

FLOOR = 0.1
CEILING = 5.0
FULL = "full"  # EvalPolicy.tier of the whole protocol: the only tier whose numbers are results
ACCEPTED = "accepted"  # Verdict.ACCEPTED.value (harness/records.py): rewards imports nothing of ours
DEFAULT_REWARD = "interval"
Interval = Sequence[float] | None


def _scaled(speedup: float) -> float:
    return min(CEILING, max(FLOOR, 1.0 + math.log2(speedup)))


def _usable(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def point_reward(verdict: str, speedup: float | None, interval: Interval = None,
                 significant: bool | None = None) -> float:
    """The point estimate's reward (the definition before intervals): noise above 1 earns more than parity."""
    if verdict != ACCEPTED or not _usable(speedup):
        return 0.0
    return _scaled(speedup)  # type: ignore[arg-type]


def interval_reward(verdict: str, speedup: float | None, interval: Interval = None,
                    significant: bool | None = None) -> float:
    """The reward of what the interval guarantees: its lower bound; no more than parity without a significant
    interval."""
    if verdict != ACCEPTED or not _usable(speedup):
        return 0.0
    low = interval[0] if interval is not None and len(interval) == 2 else None
    guaranteed = _scaled(speedup) if not _usable(low) else min(_scaled(low), _scaled(speedup))  # type: ignore[arg-type]
    if not _usable(low) or significant is False:
        return min(1.0, guaranteed)
    return guaranteed


RewardFunction = Callable[[str, float | None, Interval, bool | None], float]
REWARDS: dict[str, RewardFunction] = {"interval": interval_reward, "point": point_reward}


def reward_function(definition: str) -> RewardFunction:
    """The definition by name; ValueError naming the known ones otherwise."""
    if definition not in REWARDS:
        raise ValueError(f"unknown reward definition {definition!r}: one of {', '.join(REWARDS)}")
    return REWARDS[definition]


def reward(verdict: str, speedup: float | None, interval: Interval = None, significant: bool | None = None,
           definition: str = DEFAULT_REWARD) -> float:
    return reward_function(definition)(verdict, speedup, interval, significant)


def reward_of(record: Any, definition: str = DEFAULT_REWARD) -> float:
    """The reward of a stored evaluation record (a dict from the store or an export row, or a harness Evaluation).
    A screening-tier record (a ranking among tuning variants, never a result) earns nothing."""
    if isinstance(record, dict):
        if record.get("tier", FULL) != FULL:
            return 0.0
        return reward(str(record.get("verdict")), record.get("speedup"), record.get("speedup_ci"),
                      record.get("speedup_significant"), definition)
    if getattr(record, "tier", FULL) != FULL:
        return 0.0
    return reward(getattr(record.verdict, "value", record.verdict), record.speedup, record.speedup_ci,
                  record.speedup_significant, definition)
