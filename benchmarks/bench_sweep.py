"""Sweep throughput, measured in one run: problems per hour for a `--solutions` sweep over the bundled problems
with 1 compile worker vs 2, each on a cold build cache, then with a warm cache.

The first pair finds the precompiled torch header for the candidates' flags already built (once, timed and
printed first, in a cache both link to), as on any machine that has built with those flags before: it measures
the workers. The second pair starts from nothing (a first sweep on a new machine): the header is built while
the sweep runs (from the second cold build's start), and cold builds that start while it is nearly done wait for
it; one worker leaves a core idle for the header that two workers do not have.

    .venv/bin/python benchmarks/bench_sweep.py [--limit 6] [--skip-fully-cold]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from harness import EvalPolicy
from kernelbench.bundled import CANDIDATES_ROOT, PROBLEMS_ROOT
from kernelbench.problem import load_problems
from agent.run_spec import ModelSpec
from kernelwright.sweep_service import run_sweep
from sweeps.sweep import SweepConfig


def _sweep(workers: int, cache: str, limit: int, db: str) -> float:
    os.environ["KERNELWRIGHT_BUILD_CACHE"] = cache
    problems = load_problems(PROBLEMS_ROOT)[:limit]
    config = SweepConfig(mode="candidates", candidates_dir=str(CANDIDATES_ROOT / "cpu"), device="cpu",
                         workers=workers, policy=EvalPolicy(timing_budget_s=0.5))
    started = time.perf_counter()
    summary = run_sweep(problems, config, ModelSpec(), db)
    elapsed = time.perf_counter() - started
    assert all(p["verdict"] == "accepted" for p in summary["problems"]), summary["problems"]
    return elapsed


def _shared_header(root: str) -> float:
    """Build the header for the bundled candidates' flags (one cold evaluation gives them); its seconds."""
    from harness import evaluate
    from harness.compilation.pch import PrecompiledHeaders
    from harness.isolation.sandbox import Limits
    from kernelbench.bundled import bundled_candidate, find_bundled

    os.environ["KERNELWRIGHT_BUILD_CACHE"] = f"{root}/header"
    os.environ["KERNELWRIGHT_PCH"] = "off"
    problem = find_bundled("relu")
    cold = evaluate(problem, bundled_candidate(problem).read_text(), "cpu", EvalPolicy(timing_budget_s=0.1))
    os.environ.pop("KERNELWRIGHT_PCH")
    started = time.perf_counter()
    built = PrecompiledHeaders(Path(f"{root}/header"), Limits(900, 8192, False)).build(cold.build["builds"][0]["cflags"])
    assert built, "the precompiled header failed to build"
    for cache in ("cache-1", "cache-2"):
        Path(f"{root}/{cache}").mkdir()
        Path(f"{root}/{cache}/pch").symlink_to(built.parent)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=6)
    parser.add_argument("--skip-fully-cold", action="store_true", help="only the sweeps that find the header")
    args = parser.parse_args()
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="kw-bench-sweep-") as root:
        os.environ["KERNELWRIGHT_HOME"] = root
        db = f"sqlite:///{Path(root) / 'bench.db'}"
        header = _shared_header(root)
        rows.append(("1 worker, cold cache", _sweep(1, f"{root}/cache-1", args.limit, db)))
        rows.append(("2 workers, cold cache", _sweep(2, f"{root}/cache-2", args.limit, db)))
        rows.append(("2 workers, warm cache", _sweep(2, f"{root}/cache-2", args.limit, db)))
        if not args.skip_fully_cold:
            rows.append(("1 worker, nothing cached", _sweep(1, f"{root}/bare-1", args.limit, db)))
            rows.append(("2 workers, nothing cached", _sweep(2, f"{root}/bare-2", args.limit, db)))
    print(f"{args.limit} bundled problems, --solutions sweep, CPU device, {os.cpu_count()} cores")
    print(f"precompiled torch header for their flags, built once first: {header:.1f} s")
    for label, seconds in rows:
        print(f"{label:<26} {seconds:7.1f} s  {args.limit * 3600 / seconds:8.0f} problems/hour")
    seconds = dict(rows)
    print(f"2 workers / 1 worker: {seconds['1 worker, cold cache'] / seconds['2 workers, cold cache']:.2f}x   "
          f"warm / cold (2 workers): {seconds['2 workers, cold cache'] / seconds['2 workers, warm cache']:.1f}x")
    if not args.skip_fully_cold:
        print(f"nothing cached (header built during the sweep), 2 workers / 1 worker: "
              f"{seconds['1 worker, nothing cached'] / seconds['2 workers, nothing cached']:.2f}x")


if __name__ == "__main__":
    main()
