"""How a speedup reads wherever one is printed: the point estimate with its 95% interval, and whether it is a
result at all (a kernel not significantly faster than the reference is no speedup, whatever its verdict).
Plain values in, text out, so the CLI, the agent's progress lines and the reports say the same thing."""

from __future__ import annotations

import math
from typing import Any, Sequence

NO_SPEEDUP_FOUND = "no speedup found"

Interval = Sequence[float] | None


def faster(speedup: float | None, interval: Interval, significant: bool | None = None) -> bool:
    """Faster than the reference beyond the noise: above 1.0x with an interval that clears 1.0 (where the
    harness judged significance, its judgement; a record from before intervals were kept, which printed ones
    show as `[no interval]`, is taken at its point estimate)."""
    if speedup is None or not math.isfinite(speedup) or speedup <= 1.0:
        return False
    if significant is not None:
        return significant
    return not interval or interval[0] > 1.0


def measured(speedup: float | None, interval: Interval, digits: int = 2) -> str:
    """`1.32x [1.20-1.45]`: the point estimate (the reference's median time over the kernel's) with its 95%
    interval, never one without the other."""
    if speedup is None or not math.isfinite(speedup):
        return "-"
    if not interval:
        return f"{speedup:.{digits}f}x [no interval]"
    return f"{speedup:.{digits}f}x [{interval[0]:.{digits}f}-{interval[1]:.{digits}f}]"


def speedup_cell(speedup: float | None, interval: Interval, significant: bool | None = None,
                 digits: int = 2) -> str:
    """One kernel's measured speedup, marked `not significant` where its interval holds 1.0 and `slower` where it
    is significantly below."""
    text = measured(speedup, interval, digits)
    if text == "-" or faster(speedup, interval, significant) or (not interval and significant is None):
        return text
    slower = speedup is not None and speedup < 1.0 and (significant or (interval and interval[1] < 1.0))
    return f"{text} {'slower' if slower else 'not significant'}"


def result_cell(speedup: float | None, interval: Interval, significant: bool | None = None,
                digits: int = 2) -> str:
    """A best kernel as a result: its speedup when it is significantly faster, else `no speedup found` with the
    measurement beside it."""
    if speedup is None or not math.isfinite(speedup):
        return "-"
    if faster(speedup, interval, significant):
        return measured(speedup, interval, digits)
    return f"{NO_SPEEDUP_FOUND} ({speedup_cell(speedup, interval, significant, digits)})"


SPEEDUP_NOTE = ("speedup: the reference's median time over the kernel's, taken in each independent set of processes; "
                "with several sets, the median of the sets' speedups. The reference and candidate times are medians "
                "over all timed calls of all sets, so their ratio can differ from the speedup.")


def speedup_origin(precision: dict[str, Any] | None) -> str | None:
    """Which medians a speedup comes from: `median of 3 process sets: 2.10x, 2.26x, 2.31x`, None for one set."""
    sets = (precision or {}).get("set_speedups") or []
    if len(sets) < 2:
        return None
    return (f"median of {len(sets)} process sets' speedups: {', '.join(f'{s:.2f}x' for s in sets)} (each the set's "
            "median reference time over its median kernel time)")
