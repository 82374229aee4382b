"""Build and evaluation speed, measured in one run on the same candidate (`make bench`):

1. a cold build with plain `torch.utils.cpp_extension.load_inline` (its own process, fresh build folder) against
   kernelwright's cold evaluation of the same source (build in the jail + the whole sealed evaluation);
2. the precompiled torch header for the candidate's flags (built once, kept in the build cache), then a cold
   kernelwright build that uses it (the source differs by a comment, so the compiler runs again);
3. a cached re-evaluation and where its time goes, with children forked by the zygote and exec'd from scratch;
4. compile-only CUDA (nvcc, no GPU): torch's own compile steps vs kernelwright, without and with the host check's
   precompiled header, when nvcc is installed;
5. the light contract (torch's stable ABI headers, agent/examples/): kernelwright's cold build of the same ReLU
   against plain load_inline of its torch/extension.h form (target >= 5x), and compile-only CUDA (target <= 12 s).

    .venv/bin/python benchmarks/bench_eval.py [--problem relu] [--repeats 3] [--skip-cuda]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import EvalPolicy, Evaluation, evaluate
from kernelbench.bundled import bundled_candidate, find_bundled

FULL_RELU = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "relu_extension_h.py"  # torch/extension.h
EXAMPLES = Path(__file__).resolve().parents[1] / "agent" / "examples"
_PLAIN_BUILD = """
import sys, time, torch.utils.cpp_extension as cpp
namespace = {}
source = open(sys.argv[1]).read()
exec(source.split("load_inline(")[0].rsplit("\\n", 1)[0], namespace)  # the candidate's source strings
started = time.perf_counter()
cpp.load_inline(name="bench_plain", cpp_sources=namespace["cpp_source"], functions=FUNCTIONS,
                extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"], build_directory=sys.argv[2])
print(time.perf_counter() - started)
"""


def _plain_build_s(source: Path, functions: list[str]) -> float:
    """Plain load_inline in a fresh process and folder (what a user without kernelwright waits for)."""
    with tempfile.TemporaryDirectory(prefix="kw-bench-plain-") as folder:
        script = _PLAIN_BUILD.replace("FUNCTIONS", repr(functions))
        done = subprocess.run([sys.executable, "-c", script, str(source), folder], check=True, capture_output=True,
                              text=True)
        return float(done.stdout.split()[-1])  # the load_inline call alone (the interpreter's start not counted)


def _row(label: str, evaluation: Evaluation, wall: float) -> str:
    p = evaluation.phase_seconds
    build = sum(b.get("seconds", 0.0) for b in evaluation.build.get("builds", []))
    # on the CPU the child's `calls` phase holds the trials (timed by the parent as `correctness`) and the timing
    calls = p.get("calls", p.get("correctness", 0.0) + p.get("timing", 0.0))
    timing = p.get("timing", calls - p.get("correctness", 0.0))
    child_rest = p["child"] - sum(p.get(n, 0.0) for n in ("import", "construct")) - calls
    return (f"{label:<34} {wall:6.2f} s | build {build:6.2f} | reference {p.get('reference', 0):4.2f} | correctness "
            f"{p.get('correctness', 0):4.2f} | timing {timing:4.2f} | child start-up {child_rest:4.2f} | "
            f"rest {p['total'] - p['child'] - p.get('reference', 0):4.2f}")


def _timed_evaluation(problem, source: str, policy: EvalPolicy) -> tuple[Evaluation, float]:
    started = time.perf_counter()
    evaluation = evaluate(problem, source, "cpu", policy)
    wall = time.perf_counter() - started
    assert evaluation.accepted, evaluation.reasons
    return evaluation, wall


def _cpu(problem_name: str, repeats: int) -> None:
    from harness.compilation.pch import PrecompiledHeaders
    from harness.isolation.sandbox import Limits

    problem = find_bundled(problem_name)
    path = FULL_RELU if problem_name == "relu" else bundled_candidate(problem)  # a torch/extension.h candidate
    source = path.read_text()
    functions = [line.split('"')[1] for line in source.splitlines() if "functions=[" in line]
    policy = EvalPolicy(timing_budget_s=0.5)
    os.environ["KERNELWRIGHT_PCH"] = "off"  # the header is built explicitly below, and timed
    plain = _plain_build_s(path, functions)
    cold, cold_wall = _timed_evaluation(problem, source, policy)
    headers = PrecompiledHeaders(Path(os.environ["KERNELWRIGHT_BUILD_CACHE"]), Limits(900, 8192, False))
    cflags = cold.build["builds"][0]["cflags"]
    started = time.perf_counter()
    built = headers.build(cflags)
    header_s = time.perf_counter() - started
    changed = source.replace("#include <torch/extension.h>\n", "#include <torch/extension.h>\n// a new build\n", 1)
    with_header, header_wall = _timed_evaluation(problem, changed, policy)
    warm = [_timed_evaluation(problem, source, policy) for _ in range(repeats)]
    median = sorted(warm, key=lambda pair: pair[1])[len(warm) // 2]
    checks_only = policy.model_copy(update={"skip_timing": True})  # what a rejected candidate costs
    judged = sorted((_timed_evaluation(problem, source, checks_only) for _ in range(5)), key=lambda pair: pair[1])[2]
    os.environ["KERNELWRIGHT_ZYGOTE"] = "off"  # every child exec'd and importing torch, as before the zygote
    exec_started = [_timed_evaluation(problem, source, policy) for _ in range(repeats)]
    os.environ.pop("KERNELWRIGHT_ZYGOTE")
    exec_median = sorted(exec_started, key=lambda pair: pair[1])[len(exec_started) // 2]
    used = with_header.build["builds"][0].get("precompiled_header")
    build_plain = cold.build["builds"][0]["seconds"]
    build_pch = with_header.build["builds"][0]["seconds"]
    print(f"problem {problem.key}, CPU device, {os.cpu_count()} cores, flags {cflags.split('-std=')[-1]}")
    print(f"{'plain load_inline, cold build':<34} {plain:6.2f} s (the load_inline call: build and import)")
    print(_row("kernelwright, cold", cold, cold_wall))
    print(f"{'precompiled torch header (once)':<34} {header_s:6.2f} s ({'built' if built else 'FAILED'})")
    print(_row("kernelwright, cold, with header", with_header, header_wall) + f" (header used: {used})")
    print(_row(f"kernelwright, cached (median of {repeats})", median[0], median[1]))
    print(_row("  the same, children exec'd (no zygote)", exec_median[0], exec_median[1]))
    print(_row("cached, no timing (median of 5)", judged[0], judged[1]) + " (skip_timing: every check "
          "but the timed calls)")
    print(f"cold build: plain / kernelwright {plain / build_plain:5.2f}x without header, "
          f"{plain / build_pch:5.2f}x with header")
    print(f"cold evaluation / cached evaluation {cold_wall / median[1]:5.1f}x; cached evaluation {median[1]:.2f} s "
          f"({exec_median[1] / median[1]:.2f}x faster than exec'd children: {exec_median[1]:.2f} s)")
    if problem_name == "relu":
        _light(problem, plain, policy)


def _light(problem, plain: float, policy: EvalPolicy) -> None:
    """The light contract (stable ABI headers, agent/examples/light_cpu.py): the same ReLU built cold by
    kernelwright, against plain load_inline of the torch/extension.h form (target: >= 5x)."""
    light, light_wall = _timed_evaluation(problem, (EXAMPLES / "light_cpu.py").read_text(), policy)
    build = light.build["builds"][0]["seconds"]
    print(_row("kernelwright, cold, light contract", light, light_wall))
    print(f"light contract: plain load_inline of torch/extension.h / kernelwright's cold light build "
          f"{plain / build:5.1f}x ({plain:.1f} s / {build:.1f} s; target >= 5x)")


def _plain_cuda_compile_s(source: str) -> float:
    """What load_inline's build.ninja runs before its link, as torch writes it (nvcc -c and c++ -c, 2 jobs)."""
    from harness.compilation.cuda_compile import CPU_TORCH_DEFINES, ensure_cuda_home
    from harness.compilation.native_build import ninja_binary, torch_ninja, write_sources

    namespace: dict = {}
    exec(source.split("relu_ext = load_inline(")[0], namespace)  # the candidate's source strings
    arguments = {"cpp_sources": namespace["cpp_source"], "cuda_sources": namespace["cuda_source"],
                 "functions": ["relu_forward"], "extra_cuda_cflags": ["-O3"]}
    with tempfile.TemporaryDirectory(prefix="kw-bench-plain-cuda-") as folder:
        sources = write_sources(Path(folder), "inline", "bench_plain_cuda", arguments)
        ensure_cuda_home()
        torch_ninja(Path(folder), "bench_plain_cuda", sources, arguments, None, with_cuda=True,
                    extra=CPU_TORCH_DEFINES, extra_cuda=("-arch=sm_90", *CPU_TORCH_DEFINES))
        started = time.perf_counter()
        subprocess.run([ninja_binary(), "-j", "2", "-C", folder, "main.o", "cuda.cuda.o"], check=True,
                       capture_output=True)
        return time.perf_counter() - started


def _compile_only(problem, source: str) -> tuple[Evaluation, float, float]:
    started = time.perf_counter()
    evaluation = evaluate(problem, source, "cuda-compile-only", EvalPolicy(timing_budget_s=0.5))
    wall = time.perf_counter() - started
    assert evaluation.verdict.value == "compiled", evaluation.reasons
    return evaluation, wall, sum(b.get("seconds", 0.0) for b in evaluation.build.get("builds", []))


def _cuda() -> None:
    """Compile-only CUDA: plain (torch's own compile steps), kernelwright cold, and cold with the host check's
    precompiled header."""
    from harness.compilation.pch import PrecompiledHeaders
    from harness.isolation.sandbox import Limits

    if not shutil.which("nvcc"):
        print("compile-only CUDA: nvcc not installed here, skipped")
        return
    problem = find_bundled("relu")
    source = bundled_candidate(problem, device="cuda").read_text()
    plain = _plain_cuda_compile_s(source)
    cold, cold_wall, cold_build = _compile_only(problem, source)
    cflags = cold.build["builds"][0]["cflags"]
    started = time.perf_counter()
    built = PrecompiledHeaders(Path(os.environ["KERNELWRIGHT_BUILD_CACHE"]), Limits(900, 8192, False)).build(cflags)
    header_s = time.perf_counter() - started
    changed = source.replace("#include <torch/extension.h>\n", "#include <torch/extension.h>\n// a new build\n", 1)
    warm, warm_wall, warm_build = _compile_only(problem, changed)
    used = warm.build["builds"][0].get("precompiled_header")
    print(f"{'compile-only CUDA, plain (torch)':<34} {plain:6.2f} s (nvcc -c and c++ -c of load_inline's build.ninja, "
          "2 jobs, no link)")
    print(f"{'compile-only CUDA, kernelwright':<34} {cold_wall:6.2f} s | build {cold_build:6.2f} (nvcc -cubin and the "
          "host syntax check side by side)")
    print(f"{'host check header (once)':<34} {header_s:6.2f} s ({'built' if built else 'FAILED'})")
    print(f"{'compile-only CUDA, with header':<34} {warm_wall:6.2f} s | build {warm_build:6.2f} (header used: {used})")
    print(f"compile-only CUDA: plain / kernelwright build {plain / cold_build:5.2f}x, {plain / warm_build:5.2f}x with "
          "the header")
    _, light_wall, light_build = _compile_only(problem, (EXAMPLES / "light_cuda.py").read_text())
    print(f"{'compile-only CUDA, light contract':<34} {light_wall:6.2f} s | build {light_build:6.2f} (target: build "
          "<= 12 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="relu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-cuda", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kw-bench-") as cache:
        os.environ["KERNELWRIGHT_BUILD_CACHE"] = cache  # a cold cache: the first evaluation compiles
        _cpu(args.problem, args.repeats)
        if not args.skip_cuda:
            _cuda()


if __name__ == "__main__":
    main()
