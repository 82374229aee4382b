"""KernelBench's metrics over a sweep, with every failure counted, never dropped.

fast_p = fraction of *all* problems whose kernel is accepted and faster than p (fast_0 is the correctness rate);
the geometric-mean speedup is over accepted kernels only, and says so. Problems whose kernel is `degenerate`
(correct on a problem whose canaries pass: correctness there proves nothing) are counted apart and left out of
every rate, fast_p and the geomean.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


def summarize(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`results`: one dict per problem with `level`, `verdict` (or a failure status) and `speedup`."""
    everything = list(results)
    rows = [r for r in everything if r.get("verdict") != "degenerate"]
    accepted = [r for r in rows if r.get("verdict") == "accepted" and r.get("speedup")]
    speedups = [float(r["speedup"]) for r in accepted]
    total = len(rows)
    return {
        "problems": total,
        "degenerate": len(everything) - total,
        "correct": len(accepted),
        "correctness_rate": len(accepted) / total if total else 0.0,
        "fast_p": {f"{p:g}": (sum(s > p for s in speedups) / total if total else 0.0) for p in FAST_P},
        "geomean_speedup_correct": math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else None,
        "failures": dict(Counter(r.get("verdict") or r.get("status") or "unknown" for r in rows
                                 if r.get("verdict") != "accepted")),
    }


def by_level(results: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in results:
        grouped[f"level{row.get('level')}" if row.get("level") is not None else "other"].append(row)
        grouped["all"].append(row)
    return {level: summarize(rows) for level, rows in sorted(grouped.items())}
