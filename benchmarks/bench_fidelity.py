"""Timing fidelity: kernelwright's speedup of honest pairs against an independent measurement in one run.

For each bundled problem with a candidate for the device, the same candidate is evaluated by kernelwright
(`evaluate`, default policy) and timed directly in this process: on CUDA with `triton.testing.do_bench` where
triton is installed (L2 cleared per call, median), else with CUDA events around each call after an L2 flush; on
the CPU with `perf_counter_ns` around each call, one thread, on kernelwright's timing core, alternating reference and
candidate, in kernelwright's CPU regime: batches of fresh input sets written just before (up to 32 MB), every
output kept until its batch ends, the weights warm. Prints one markdown table (ratio = kernelwright speedup / independent speedup) and the
cached-evaluation seconds.

    .venv/bin/python benchmarks/bench_fidelity.py --device cpu [--problems relu gelu] [--repeats 2] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import torch

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.isolation.timing_slot import timing_cpus
from harness.paths import home
from harness.values.modules import module_from_file
from kernelbench.bundled import bundled_candidate, bundled_problems
from kernelbench.problem import Problem

HEADING = "# Timing fidelity: kernelwright's speedups against an independent measurement"

def _cpu_ms(call: Callable[[], Any]) -> float:
    started = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - started) / 1e6


def _cuda_ms(call: Callable[[], Any]) -> float:
    try:
        from triton.testing import do_bench

        return float(do_bench(call, warmup=25, rep=200, return_mode="median"))
    except ImportError:
        flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
        samples = []
        for _ in range(100):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end))
        return statistics.median(samples)


def independent_speedup(problem: Problem, candidate_path: Any, device: str) -> tuple[float, float, float]:
    """(reference ms, candidate ms, speedup) measured in this process."""
    torch.manual_seed(0)
    module = module_from_file(problem_path(problem), f"problem_{abs(hash(problem.name))}")
    candidate = module_from_file(candidate_path, f"candidate_{abs(hash(problem.name))}")
    init = module.get_init_inputs()
    torch.manual_seed(1)
    reference = module.Model(*init).to(device)
    torch.manual_seed(1)
    new = candidate.ModelNew(*init).to(device)
    first = module.get_inputs()
    size = sum(v.numel() * v.element_size() for v in first if isinstance(v, torch.Tensor))
    count = max(8, min(64, (32 << 20) // max(size, 1)))  # as many input sets as a kernelwright batch holds
    pool = [[v.to(device) if isinstance(v, torch.Tensor) else v for v in module.get_inputs()] for _ in range(count)]
    allowed = os.sched_getaffinity(0)
    if device == "cpu":  # on one core, as kernelwright pins its timed children
        os.sched_setaffinity(0, {int(timing_cpus(1))})
    try:
        return _measure(reference, new, pool, device)
    finally:
        os.sched_setaffinity(0, allowed)


def _measure(reference: Any, new: Any, pool: list[list[Any]], device: str) -> tuple[float, float, float]:
    ms: dict[str, list[float]] = {"ref": [], "cand": []}
    with torch.no_grad():
        for model in (reference, new):  # warm-up
            for inputs in pool:
                model(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
            ref = _cuda_ms(lambda: reference(*pool[0]))
            cand = _cuda_ms(lambda: new(*pool[0]))
            return ref, cand, ref / cand
        for round_ in range(24):  # kernelwright's CPU regime: a batch of fresh input sets written just before,
            # each call's output kept until the batch ends, the model's weights warm
            batch = [[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs] for inputs in pool]
            for name, model in (("ref", reference), ("cand", new)) if round_ % 2 == 0 else \
                    (("cand", new), ("ref", reference)):
                kept = []
                for inputs in batch:
                    ms[name].append(_cpu_ms(lambda: kept.append(model(*inputs))))
    ref, cand = statistics.median(ms["ref"]), statistics.median(ms["cand"])
    return ref, cand, ref / cand


def problem_path(problem: Problem) -> Any:
    from pathlib import Path
    import tempfile

    if problem.path and Path(problem.path).exists():
        return Path(problem.path)
    file = Path(tempfile.mkdtemp()) / "problem.py"
    file.write_text(problem.source)
    return file


def _extension_cache() -> None:
    """torch builds the candidates for the direct measurement in its own cache, kept between runs; a run killed
    mid-build leaves a lock that makes the next wait forever, so locks left there are removed first (do not run
    two of these benchmarks at once)."""
    folder = (home() / "bench-extensions").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for lock in folder.glob("*/*/lock"):
        lock.unlink(missing_ok=True)
    for lock in folder.glob("*/lock"):
        lock.unlink(missing_ok=True)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(folder)


def selected(names: list[str] | None, device: str) -> list[tuple[Problem, Any]]:
    """The bundled pairs whose name contains one of `names` (every pair without names) that have a candidate for
    the device."""
    chosen = []
    for problem in bundled_problems():
        if names and not any(p.lower() in problem.name.lower() for p in names):
            continue
        try:
            path = bundled_candidate(problem, device)
        except Exception:
            continue
        if path.exists():
            chosen.append((problem, path))
    return chosen


def main() -> None:
    _extension_cache()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--problems", nargs="*", help="names to match (default: every bundled pair)")
    parser.add_argument("--repeats", type=int, default=2, help="kernelwright evaluations per pair")
    parser.add_argument("--smoke", action="store_true", help="that the script runs: the first pair only (ReLU), one "
                        "evaluation with a 0.05 s timing budget (its figures mean nothing)")
    args = parser.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(1)
    pairs = selected(args.problems, args.device)
    policy = EvalPolicy()
    if args.smoke:
        pairs, args.repeats, policy = pairs[:1], 1, EvalPolicy(timing_budget_s=0.05)
    print(HEADING + f" ({args.device})" + (" (smoke run: the figures are not measurements)" if args.smoke else ""))
    rows = []
    print("| pair | kernelwright speedups | cached eval s | independent ref / cand ms | independent speedup | ratio |")
    print("|---|---|---|---|---|---|", flush=True)
    for problem, path in pairs:
        evaluations = [evaluate(problem, path.read_text(), args.device, policy) for _ in range(args.repeats)]
        speedups = [e.speedup for e in evaluations if e.speedup]
        seconds = [e.phase_seconds.get("total", 0.0) for e in evaluations[1:]] or [0.0]
        ref, cand, truth = independent_speedup(problem, path, args.device)
        mean = statistics.mean(speedups) if speedups else float("nan")
        rows.append(mean / truth)
        print(f"| {problem.name} | {', '.join(f'{s:.3f}' for s in speedups) or evaluations[0].verdict.value} | "
              f"{statistics.median(seconds):.2f} | {ref:.4f} / {cand:.4f} | {truth:.3f} | {mean / truth:.3f} |",
              flush=True)
    if rows:
        print(f"\nratio kernelwright / independent: median {statistics.median(rows):.3f}, "
              f"range {min(rows):.3f}-{max(rows):.3f} over {len(rows)} pairs", file=sys.stderr)


if __name__ == "__main__":
    main()
