"""Sweep throughput, measured in one run: problems per hour for a `--solutions` sweep over the bundled problems
with 1 compile worker vs 2, each on a cold build cache, then with a warm cache.

Which precompiled-header rows apply follows from the candidates' form (benchmarks/forms.py), not from which
bundled file uses which. Light candidates (stable-ABI headers, the bundled set today) build in seconds and no
header applies: the rows are cold vs warm and 1 vs 2 workers. Where some candidates are full form
(torch/extension.h), the cold pair first finds the header for their flags already built (once, timed and printed
first, in a cache both link to), as on any machine that has built with those flags before: it measures the
workers; a second pair then starts from nothing (a first sweep on a new machine), the header built while the
sweep runs. The header figures of a single full-form candidate are bench_eval's.

    .venv/bin/python benchmarks/bench_sweep.py [--limit 6] [--skip-fully-cold] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from harness.policy import EvalPolicy
from harness.records import Verdict
from kernelbench.bundled import CANDIDATES_ROOT, PROBLEMS_ROOT, bundled_candidate
from kernelbench.problem import Problem, load_problems
from agent.run_spec import ModelSpec
from kernelwright.sweep_service import run_sweep
from sweeps.sweep import SweepConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forms import form  # noqa: E402

HEADING = "# kernelwright sweep throughput"


def _sweep(problems: list[Problem], workers: int, cache: str, db: str, budget_s: float) -> float:
    os.environ["KERNELWRIGHT_BUILD_CACHE"] = cache
    config = SweepConfig(mode="candidates", candidates_dir=str(CANDIDATES_ROOT / "cpu"), device="cpu",
                         workers=workers, policy=EvalPolicy(timing_budget_s=budget_s))
    started = time.perf_counter()
    summary = run_sweep(problems, config, ModelSpec(), db)
    elapsed = time.perf_counter() - started
    assert all(p["verdict"] == Verdict.ACCEPTED for p in summary["problems"]), summary["problems"]
    return elapsed


def _shared_header(root: str, full: Problem) -> float:
    """Build the header for a full-form candidate's flags (one cold evaluation gives them), link it into both cold
    caches; its seconds."""
    from harness.pipeline import evaluate
    from harness.compilation.pch import PrecompiledHeaders
    from harness.isolation.sandbox import Limits

    os.environ["KERNELWRIGHT_BUILD_CACHE"] = f"{root}/header"
    os.environ["KERNELWRIGHT_PCH"] = "off"
    cold = evaluate(full, bundled_candidate(full).read_text(), "cpu", EvalPolicy(timing_budget_s=0.1))
    os.environ.pop("KERNELWRIGHT_PCH")
    started = time.perf_counter()
    headers = PrecompiledHeaders(Path(f"{root}/header"), Limits(900, 8192, False))
    built = headers.build(cold.build["builds"][0]["cflags"])
    assert built, f"the precompiled header for {full.key}'s flags failed to build"
    for cache in ("cache-1", "cache-2"):
        Path(f"{root}/{cache}").mkdir()
        Path(f"{root}/{cache}/pch").symlink_to(built.parent)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=6, help="the first N bundled problems")
    parser.add_argument("--budget-s", type=float, default=0.5, help="timing budget per model")
    parser.add_argument("--skip-fully-cold", action="store_true", help="only the sweeps that find the header")
    parser.add_argument("--smoke", action="store_true", help="that the script runs: one problem, a 0.05 s timing "
                        "budget (seconds; its figures mean nothing)")
    args = parser.parse_args()
    limit, budget = (1, 0.05) if args.smoke else (args.limit, args.budget_s)
    print(HEADING + (" (smoke run: the figures are not measurements)" if args.smoke else ""), flush=True)
    problems = load_problems(PROBLEMS_ROOT)[:limit]
    full = [p for p in problems if form(bundled_candidate(p).read_text()) == "full"]
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="kw-bench-sweep-") as root:
        os.environ["KERNELWRIGHT_HOME"] = root
        db = f"sqlite:///{Path(root) / 'bench.db'}"
        header = _shared_header(root, full[0]) if full else None
        rows.append(("1 worker, cold cache", _sweep(problems, 1, f"{root}/cache-1", db, budget)))
        rows.append(("2 workers, cold cache", _sweep(problems, 2, f"{root}/cache-2", db, budget)))
        rows.append(("2 workers, warm cache", _sweep(problems, 2, f"{root}/cache-2", db, budget)))
        rows.append(("1 worker, warm cache", _sweep(problems, 1, f"{root}/cache-1", db, budget)))
        if full and not (args.skip_fully_cold or args.smoke):
            rows.append(("1 worker, nothing cached", _sweep(problems, 1, f"{root}/bare-1", db, budget)))
            rows.append(("2 workers, nothing cached", _sweep(problems, 2, f"{root}/bare-2", db, budget)))
    forms = f"{len(full)} full form, {len(problems) - len(full)} light"
    print(f"{limit} bundled problems ({forms}), --solutions sweep, CPU device, {os.cpu_count()} cores, timing budget "
          f"{budget} s per model")
    if header is None:
        print("no candidate builds against torch/extension.h: no precompiled header applies")
    else:
        print(f"precompiled torch header for the full-form candidates' flags, built once first: {header:.1f} s")
    for label, seconds in rows:
        print(f"{label:<26} {seconds:7.1f} s  {seconds / limit:6.1f} s/problem  {limit * 3600 / seconds:8.0f} "
              "problems/hour")
    seconds = dict(rows)
    print(f"2 workers / 1 worker: cold {seconds['1 worker, cold cache'] / seconds['2 workers, cold cache']:.2f}x, "
          f"warm {seconds['1 worker, warm cache'] / seconds['2 workers, warm cache']:.2f}x   "
          f"cold / warm (2 workers): {seconds['2 workers, cold cache'] / seconds['2 workers, warm cache']:.1f}x")
    if "2 workers, nothing cached" in seconds:
        print(f"nothing cached (header built during the sweep), 2 workers / 1 worker: "
              f"{seconds['1 worker, nothing cached'] / seconds['2 workers, nothing cached']:.2f}x")


if __name__ == "__main__":
    main()
