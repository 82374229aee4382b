"""Problem-level services for the CLI: size-reduction reports."""

from __future__ import annotations

from typing import Any, Callable

from kernelbench.problem import Problem, ProblemError
from kernelbench.shrink import Footprint, shrink_problem


def _describe(footprint: Footprint) -> str:
    return f"{footprint.bytes / 2**20:.1f} MiB, {footprint.flops:.3g} FLOP"


def shrink_report(problems: list[Problem], progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for index, problem in enumerate(problems):
        if progress:
            progress(f"[{index + 1}/{len(problems)}] {problem.key}")
        try:
            result = shrink_problem(problem)
        except ProblemError as exc:
            rows.append({"problem": problem.key, "status": "cannot shrink", "reason": str(exc)})
            continue
        rows.append({"problem": problem.key, "status": "shrunk" if result.changes else "fits",
                     "before": _describe(result.before), "after": _describe(result.after),
                     "changes": ", ".join(f"{k} {a}->{b}" for k, (a, b) in result.changes.items())})
    return rows
