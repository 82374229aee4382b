"""`make gpu-check`: everything a GPU machine can tell us, in one run and one markdown report.

1. the GPU tests (`pytest -m gpu`);
2. timing fidelity: every bundled CUDA pair at its own size and at a KernelBench-like size (batch and dim sizes
   scaled until a forward moves about 512 MB), timed by kernelwright (twice: the spread between two evaluations) and by `triton.testing.do_bench`
   (or CUDA events after an L2 flush) in the same process, with the ratios;
3. the cached-evaluation seconds of each pair and where they went;
4. one scripted `optimize` round trip on the GPU with its time split.

The report goes to stdout and to runs/gpu-check.md. Budget: under 10 minutes on one H100.

    .venv/bin/python benchmarks/gpu_check.py [--skip-tests] [--pairs relu gelu]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from bench_fidelity import independent_speedup  # noqa: E402
from harness import EvalPolicy, evaluate  # noqa: E402
from harness.paths import home  # noqa: E402
from kernelbench.bundled import bundled_candidate, bundled_problems  # noqa: E402
from kernelbench.problem import Problem, problem_from_source  # noqa: E402
from kernelbench.shrink import measure, rewrite_constants, size_constants  # noqa: E402

LARGE_BYTES = 1 << 29  # 512 MB moved per forward (inputs, outputs, weights): a large KernelBench level-1 problem


def run_gpu_tests() -> list[str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider"],
                          capture_output=True, text=True)
    tail = done.stdout.strip().splitlines()[-15:]
    return ["## GPU tests", "", f"`pytest -m gpu`: exit {done.returncode} in {time.perf_counter() - started:.0f} s",
            "", "```", *tail, "```", ""]


def scaled_up(problem: Problem) -> Problem | None:
    """The problem with its batch and dim sizes scaled so one forward moves about LARGE_BYTES (measured on the
    meta device), or None where those constants do not scale it there."""
    constants = {c.name: c.value for c in size_constants(problem.source)
                 if c.value > 8 and ("dim" in c.name.lower() or c.name.lower().startswith("batch"))}
    if not constants:
        return None
    before = measure(problem.source).bytes
    factor = (LARGE_BYTES / max(before, 1)) ** (1 / len(constants))
    if factor <= 1.5:
        return None
    source = rewrite_constants(problem.source, {k: int(v * factor) for k, v in constants.items()})
    if not LARGE_BYTES / 4 <= measure(source).bytes <= LARGE_BYTES * 4:
        return None
    return problem_from_source(source, f"{problem.name}_large", level=problem.level, problem_id=problem.problem_id)


DEVICE = "cuda"  # `--device cpu` runs the whole script on the CPU pairs: a smoke test of the script itself


def fidelity(pairs: list[str] | None) -> tuple[list[str], list[float]]:
    rows = ["## Timing fidelity (kernelwright vs do_bench, same process)", "",
            "| pair | kernelwright speedups (2 evals) | spread | cached eval s | do_bench ref / cand ms | do_bench "
            "speedup | ratio | clock | checked calls |", "|---|---|---|---|---|---|---|---|---|"]
    ratios: list[float] = []
    for problem in bundled_problems():
        if pairs and not any(p.lower() in (problem.name.lower(), problem.key.lower()) for p in pairs):
            continue
        try:
            path = bundled_candidate(problem, DEVICE)
        except Exception:
            continue
        for variant in (problem, scaled_up(problem)):
            if variant is None:
                continue
            rows.append(_fidelity_row(variant, path, ratios))
            print(rows[-1], flush=True)
    return rows + [""], ratios


def _fidelity_row(problem: Problem, path: Path, ratios: list[float]) -> str:
    source = path.read_text()
    evaluations = [evaluate(problem, source, DEVICE, EvalPolicy()) for _ in range(2)]
    speedups = [e.speedup for e in evaluations if e.accepted and e.speedup]
    if len(speedups) < 2:
        return f"| {problem.name} | {evaluations[-1].verdict.value}: {(evaluations[-1].reasons or [''])[0][:120]} |"
    timing = evaluations[-1].isolation.get("timing", {})
    seconds = evaluations[-1].phase_seconds
    split = ", ".join(f"{k} {seconds[k]:.1f}" for k in ("reference", "correctness", "timing") if k in seconds)
    ref, cand, truth = independent_speedup(problem, path, DEVICE)
    mean = statistics.mean(speedups)
    ratios.append(mean / truth)
    spread = abs(speedups[0] - speedups[1]) / mean
    return (f"| {problem.name} | {speedups[0]:.3f}, {speedups[1]:.3f} | {spread:.1%} | {seconds.get('total', 0):.1f} "
            f"({split}) | {ref:.4f} / {cand:.4f} | {truth:.3f} | {mean / truth:.3f} | {timing.get('clock', '?')} | "
            f"{timing.get('timed_outputs_checked', '?')} of {timing.get('calls_per_model', '?')} |")


def optimize_round_trip() -> list[str]:
    from agent.config import OptimizeConfig
    from agent.run_spec import ModelSpec
    from kernelwright.optimize_service import run_optimize

    relu = next(p for p in bundled_problems() if p.name == "ReLU")
    kernel = bundled_candidate(relu, DEVICE).read_text()
    script = {"replies": [
        {"purpose": "coder", "content": f"A grid-stride ReLU.\n\n```python\n{kernel}\n```"},
        {"purpose": "judge", "content": json.dumps({"diagnosis": "memory bound, one pass", "change": "vectorize loads"})},
        {"purpose": "coder", "content": f"Same kernel, unrolled.\n\n```python\n{kernel.replace('256', '512')}\n```"}]}
    file = Path(tempfile.mkdtemp()) / "gpu_check_script.json"
    file.write_text(json.dumps(script))
    started = time.perf_counter()
    try:
        result = run_optimize("relu", OptimizeConfig(device=DEVICE, rounds=2, patience=2),
                              ModelSpec(model=f"scripted:{file}"), None)
    except Exception as exc:  # the report says what failed; the rest of the check still counts
        return ["## Scripted optimize round trip", "", f"failed: {type(exc).__name__}: {exc}", ""]
    wall = time.perf_counter() - started
    best = result.get("best") or {}
    return ["## Scripted optimize round trip (2 rounds, ReLU)", "", f"status {result.get('status')}: "
            f"{result.get('message') or ''}; wall {wall:.1f} s; best {best.get('verdict')} {best.get('speedup')} "
            f"(round {best.get('round')}); time split: `{json.dumps(result.get('seconds', {}))}`", ""]


def header() -> list[str]:
    machine = torch.cuda.get_device_properties(0).name if DEVICE == "cuda" else f"CPU ({platform.processor()})"
    return ["# kernelwright gpu-check", "", f"{machine}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
            f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-tests", action="store_true", help="skip the GPU tests")
    parser.add_argument("--pairs", nargs="*", help="bundled pairs to time (default: all with a CUDA candidate)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: the same report on the CPU pairs (a smoke test of this script)")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu-check needs a CUDA GPU visible to torch (torch.cuda.is_available() is False)")
    started = time.perf_counter()
    lines = header()
    if not args.skip_tests:
        lines += run_gpu_tests()
    rows, ratios = fidelity(args.pairs)
    lines += rows
    if ratios:
        lines += [f"ratio kernelwright / do_bench: median {statistics.median(ratios):.3f}, range "
                  f"{min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} pairs", ""]
    lines += optimize_round_trip()
    lines.append(f"gpu-check took {time.perf_counter() - started:.0f} s")
    report = "\n".join(lines)
    out = home() / ("gpu-check.md" if DEVICE == "cuda" else "gpu-check-cpu-smoke.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report + "\n")
    print(report)
    print(f"\nreport written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
