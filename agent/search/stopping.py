"""When a run stops, beyond rounds and budgets: the speed of light (the best kernel is within a stated fraction of
the device's floor: harness/feedback/roofline.py) and diminishing returns (the last rounds' gain per LLM call fell
under a threshold). Each rule, and every other reason a run ends, says so in words for the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SPEED_OF_LIGHT, DIMINISHING = "speed_of_light", "diminishing_returns"


def floor_fraction(roofline: dict[str, Any]) -> float | None:
    """The kernel's fraction of the device's floor (1.0: at the roofline), None where no floor was computed."""
    value = roofline.get("candidate_fraction") if roofline else None
    return float(value) if isinstance(value, (int, float)) else None


def floor_line(roofline: dict[str, Any]) -> str:
    """How close a kernel is to the floor, in words ("" where no floor was computed)."""
    fraction = floor_fraction(roofline)
    if fraction is None or "floor_ms" not in roofline:
        return ""
    return (f"{fraction:.0%} of the device's floor ({roofline['floor_ms']:.4g} ms, {roofline.get('bound', '?')}-bound"
            f" on {roofline.get('spec', 'this device')})")


@dataclass
class Stopper:
    """`sol_target`: stop once the best kernel's fraction of the floor reaches it (None/0: off);
    `min_gain_per_call` over `window` rounds: stop once the best speedup's relative gain per LLM call over the last
    `window` rounds is under it (None/0: off)."""

    sol_target: float | None
    min_gain_per_call: float | None
    window: int
    trail: list[tuple[float | None, int]] = field(default_factory=list)  # per round: best speedup, LLM calls so far

    def after_round(self, best_speedup: float | None, best_roofline: dict[str, Any], llm_calls: int) -> \
            tuple[str, str] | None:
        """(status, why) when a rule stops the run after this round, else None."""
        self.trail.append((best_speedup, llm_calls))
        fraction = floor_fraction(best_roofline)
        if self.sol_target and fraction is not None and fraction >= self.sol_target:
            return SPEED_OF_LIGHT, (f"speed of light: the best kernel runs at {floor_line(best_roofline)}, at or "
                                    f"over the {self.sol_target:.0%} target")
        return self._diminishing()

    def _diminishing(self) -> tuple[str, str] | None:
        if not self.min_gain_per_call or len(self.trail) <= self.window:
            return None
        (then, calls_then), (now, calls_now) = self.trail[-1 - self.window], self.trail[-1]
        if not then or not now or calls_now <= calls_then:
            return None
        gain = (now / then - 1.0) / (calls_now - calls_then)
        if gain >= self.min_gain_per_call:
            return None
        return DIMINISHING, (f"diminishing returns: the last {self.window} rounds took the best from {then:.3f}x to "
                             f"{now:.3f}x over {calls_now - calls_then} LLM calls, {gain:.2%} a call, under the "
                             f"{self.min_gain_per_call:.2%} threshold")


_WHY = {"finished": "the round limit", "converged": "patience: {patience} rounds without a faster kernel",
        "first_accepted": "the first accepted kernel (stop_at_first_accepted)", "budget_usd": "the dollar budget",
        "max_tokens": "the token budget", "time_limit": "the time limit", "interrupted": "an interrupt (Ctrl-C)",
        "failed": "failing LLM calls", "no_kernel": "no kernel to evaluate"}


def stopped_by(status: str, config: Any) -> str:
    """Which rule ended a run whose status is not one of this module's own."""
    return _WHY.get(status, status).format(patience=getattr(config, "patience", "?"))
