"""Evaluation speed, measured in one run: cold (compiler runs) vs cached re-evaluation of the same candidate,
and where the time of a cached evaluation goes (the harness's own overhead beyond build + reference +
candidate run time).

    .venv/bin/python benchmarks/bench_eval.py [--problem relu] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from harness import EvalPolicy, Evaluation, evaluate
from kernelbench.bundled import bundled_candidate, find_bundled

WORK_PHASES = ("reference", "import", "construct", "correctness", "timing")


def _overhead(evaluation: Evaluation) -> float:
    phases = evaluation.phase_seconds
    return phases["total"] - sum(phases.get(name, 0.0) for name in WORK_PHASES)


def _row(label: str, evaluation: Evaluation) -> str:
    p = evaluation.phase_seconds
    child_startup = p["child"] - sum(p.get(n, 0.0) for n in ("import", "construct", "correctness", "timing"))
    return (f"{label:<10} total {p['total']:7.2f} s | build/import {p.get('import', 0):6.2f} | reference "
            f"{p.get('reference', 0):5.2f} | correctness {p.get('correctness', 0):5.2f} | timing "
            f"{p.get('timing', 0):5.2f} | child start-up {child_startup:5.2f} | overhead {_overhead(evaluation):5.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="relu")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    problem = find_bundled(args.problem)
    source = bundled_candidate(problem).read_text()
    policy = EvalPolicy(timing_budget_s=0.5)
    with tempfile.TemporaryDirectory(prefix="kw-bench-") as cache:
        os.environ["KERNELWRIGHT_BUILD_CACHE"] = cache  # a cold cache: the first evaluation compiles
        started = time.perf_counter()
        cold = evaluate(problem, source, "cpu", policy)
        cold_wall = time.perf_counter() - started
        warm = [evaluate(problem, source, "cpu", policy) for _ in range(args.repeats)]
    assert cold.accepted and all(w.accepted for w in warm), (cold.reasons, [w.reasons for w in warm])
    warm_total = statistics.median(w.phase_seconds["total"] for w in warm)
    median_warm = min(warm, key=lambda w: abs(w.phase_seconds["total"] - warm_total))
    print(f"problem {problem.key}, CPU device, {os.cpu_count()} cores, torch threads 1")
    print(_row("cold", cold))
    print(_row("cached", median_warm))
    print(f"cold evaluation        {cold_wall:7.2f} s (compiler ran: {not cold.build['builds'][0]['cache_hit']})")
    print(f"cached re-evaluation   {warm_total:7.2f} s (median of {args.repeats}, cache hit: "
          f"{all(w.build['builds'][0]['cache_hit'] for w in warm)})")
    print(f"cold / cached          {cold_wall / warm_total:7.1f} x")
    print(f"harness overhead       {_overhead(median_warm):7.2f} s of {warm_total:.2f} s cached "
          f"({100 * _overhead(median_warm) / warm_total:.0f}%): child interpreter + torch import, scratch I/O, "
          "process-tree bookkeeping, output comparison")


if __name__ == "__main__":
    main()
