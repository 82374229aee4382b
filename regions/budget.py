"""The search budget split over regions: by each region's share of the model's time and its distance to the
device's floor (harness/feedback/roofline.py): a region already near its floor has little left to win however hot
it is. Budgets given for the whole model (dollars, tokens, seconds) are split by these weights; rounds are a cap per
region."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.feedback.roofline import roofline
from kernelbench.problem import Problem


@dataclass(frozen=True)
class RegionBudget:
    slug: str
    weight: float  # of the whole budget (the weights sum to 1)
    headroom: float  # 1 - floor / region time: what any kernel could still win (1.0 where no floor is known)
    budget_usd: float | None
    max_tokens: int | None
    time_limit_s: float | None


def headroom(problem: Problem, device: str, region_ms: float, device_info: dict[str, Any] | None = None) -> float:
    """1 - the region's floor over its measured time (clipped to [0.05, 1]: a floor is an estimate)."""
    record = roofline(problem, device, device_info or {}, region_ms, None)
    floor = record.get("floor_ms")
    if not floor or region_ms <= 0:
        return 1.0
    return min(1.0, max(0.05, 1.0 - floor / region_ms))


def split_budget(regions: list[tuple[str, float, float]], budget_usd: float | None, max_tokens: int | None,
                 time_limit_s: float | None) -> list[RegionBudget]:
    """`regions`: (slug, share of the model's time, headroom). Each region's weight is share x headroom over the
    sum; the budgets are split by it (a region gets at least 1 token and a second where a budget is given)."""
    raw = [share * room for _, share, room in regions]
    total = sum(raw) or 1.0
    split = []
    for (slug, _, room), value in zip(regions, raw):
        weight = value / total
        split.append(RegionBudget(
            slug, weight, room, None if budget_usd is None else budget_usd * weight,
            None if max_tokens is None else max(1, int(max_tokens * weight)),
            None if time_limit_s is None else max(1.0, time_limit_s * weight)))
    return split
