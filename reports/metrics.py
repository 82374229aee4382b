"""KernelBench's metrics over a sweep, with every failure counted, never dropped.

fast_p = fraction of *all* problems whose kernel is accepted and faster than p (fast_0 is the correctness rate);
the geometric-mean speedup is over accepted kernels only, and says so. Problems whose kernel is `degenerate`
(correct on a problem whose canaries pass: correctness there proves nothing) are counted apart and left out of
every rate, fast_p and the geomean.

Noise is not counted (issue 32): where a row carries its speedup's 95% interval (`speedup_ci`, widened by the A/A
floor), a kernel counts as faster than p only if the whole interval is above p, and the geomean takes a speedup
whose interval holds 1.0 as 1.0 (no measurable change); `geomean_speedup_point` keeps the plain point estimates
and `within_noise` counts the accepted kernels whose interval holds 1.0. Rows without an interval (older stores)
count by their point estimate.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable

from harness.records import Verdict

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


def fast_p_fraction(best: list[tuple[float, float]], total: int, p: float) -> float:
    """fast_p, the one definition the table and the report's chart share: the fraction of `total` problems whose
    best accepted speedup is above p with its whole 95% interval. `best`: per problem (speedup, interval's low)."""
    return sum(s > p and low > p for s, low in best) / total if total else 0.0


def summarize(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`results`: one dict per problem with `level`, `verdict` (or a failure status) and `speedup`."""
    everything = list(results)
    rows = [r for r in everything if r.get("verdict") != Verdict.DEGENERATE]
    accepted = [r for r in rows if r.get("verdict") == Verdict.ACCEPTED and r.get("speedup")]
    speedups = [float(r["speedup"]) for r in accepted]
    lows = [_interval(r)[0] for r in accepted]
    resolved = [1.0 if _holds_one(r) else s for r, s in zip(accepted, speedups)]
    total = len(rows)
    return {
        "problems": total,
        "degenerate": len(everything) - total,
        "correct": len(accepted),
        "correctness_rate": len(accepted) / total if total else 0.0,
        "fast_p": {f"{p:g}": fast_p_fraction(list(zip(speedups, lows)), total, p) for p in FAST_P},
        "geomean_speedup_correct": _geomean(resolved),
        "geomean_speedup_point": _geomean(speedups),
        "within_noise": sum(_holds_one(r) for r in accepted),
        "failures": dict(Counter(r.get("verdict") or r.get("status") or "unknown" for r in rows
                                 if r.get("verdict") != Verdict.ACCEPTED)),
    }


def _interval(row: dict[str, Any]) -> tuple[float, float]:
    """The row's 95% interval, or its point estimate twice where it has none."""
    ci = row.get("speedup_ci")
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci):
        return float(ci[0]), float(ci[1])
    return float(row["speedup"]), float(row["speedup"])


def _holds_one(row: dict[str, Any]) -> bool:
    low, high = _interval(row)
    return low <= 1.0 <= high and low < high


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def by_level(results: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in results:
        grouped[f"level{row.get('level')}" if row.get("level") is not None else "other"].append(row)
        grouped["all"].append(row)
    return {level: summarize(rows) for level, rows in sorted(grouped.items())}
