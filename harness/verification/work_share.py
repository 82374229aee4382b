"""The kernels' share of the work, not of the time (issue 44): time inside a kernel can be bought by spinning, work
cannot. The library's work is what the compute census counted (harness/child/census.py: every ATen operator outside
the candidate's kernels and inside them, FLOPs by torch's counter, one per element otherwise); the reference's is
the same count over one forward of the reference on the meta device (kernelbench/shrink.py `measure`). What the
library did not do of the reference's work is the kernels' share; where a tensor left PyTorch for another library's
compute (NumPy's BLAS: no operator, no FLOP to count) the kernels' share is none."""

from __future__ import annotations

from typing import Any

from harness.child.census import LEFT
from kernelbench.problem import Problem, ProblemError


def reference_flops(problem: Problem) -> float | None:
    """One forward of the reference's work in FLOPs (None where it cannot run on the meta device)."""
    from kernelbench.shrink import measure

    try:
        flops = measure(problem.source).all_flops
    except ProblemError:
        return None
    return flops if flops > 0 else None


def work_share(census: dict[str, Any] | None, reference: float | None) -> float | None:
    """1 - the library's FLOPs per audited call / the reference's per forward, within [0, 1]; None where either is
    unknown."""
    if census and any(str(name).endswith(LEFT) for name in census.get("ops") or {}):
        return 0.0  # a tensor left PyTorch for another library's compute: its work is uncounted, so none is credited
    if not census or reference is None or "flops" not in census:
        return None
    per_call = float(census["flops"]) / max(1, int(census.get("calls") or 1))
    return min(1.0, max(0.0, 1.0 - per_call / reference))
