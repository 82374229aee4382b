"""Build and evaluation speed, measured in one run (`make bench`), each figure on a candidate of the form it is about
(benchmarks/forms.py):

1. full form (torch/extension.h; for ReLU tests/fixtures/relu_extension_h.py): a cold build with plain
   `torch.utils.cpp_extension.load_inline` (its own process, fresh build folder) against kernelwright's cold
   evaluation of the same source (build in the jail + the whole sealed evaluation); the precompiled torch header
   for its flags (built once, kept in the build cache), then a cold kernelwright build that uses it (the source
   differs by a comment, so the compiler runs again);
2. light form (torch's stable ABI headers; the bundled candidate): kernelwright's cold build against plain
   load_inline of the full form (target >= 5x);
3. a cached re-evaluation of the light candidate and where its time goes, with children forked by the zygote and
   exec'd from scratch, and without timing;
4. compile-only CUDA (nvcc, no GPU): torch's own compile steps vs kernelwright, without and with the host check's
   precompiled header, and the light form (target <= 12 s), when nvcc is installed.

    .venv/bin/python benchmarks/bench_eval.py [--problem relu] [--repeats 3] [--skip-cuda] [--smoke]
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

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Evaluation
from kernelbench.bundled import bundled_candidate, find_bundled

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forms import candidate_of_form, form  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "agent" / "examples"
HEADING = "# kernelwright build and evaluation speed"
# the candidate's own load_inline call, run as written in a fresh process and folder (either form)
_PLAIN_BUILD = """
import sys, time, torch.utils.cpp_extension as cpp
real, spent = cpp.load_inline, []
def timed(*args, **kwargs):
    kwargs["build_directory"] = sys.argv[2]
    started = time.perf_counter()
    try:
        return real(*args, **kwargs)
    finally:
        spent.append(time.perf_counter() - started)
cpp.load_inline = timed
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"__name__": "bench_plain"})
print(sum(spent))
"""


def _plain_build_s(source: Path) -> float:
    """Plain load_inline in a fresh process and folder (what a user without kernelwright waits for)."""
    with tempfile.TemporaryDirectory(prefix="kw-bench-plain-") as folder:
        done = subprocess.run([sys.executable, "-c", _PLAIN_BUILD, str(source), folder], check=True,
                              capture_output=True, text=True)
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


def _median(runs: list[tuple[Evaluation, float]]) -> tuple[Evaluation, float]:
    return sorted(runs, key=lambda pair: pair[1])[len(runs) // 2]


def _cpu(problem_name: str, repeats: int, smoke: bool) -> None:
    problem = find_bundled(problem_name)
    full, light = candidate_of_form(problem, "full"), candidate_of_form(problem, "light")
    policy = EvalPolicy(timing_budget_s=0.05 if smoke else 0.5)
    print(f"problem {problem.key}, CPU device, {os.cpu_count()} cores; full form {full.name}, light form "
          f"{light.name}; timing budget {policy.timing_budget_s} s per model")
    if smoke:  # a torch/extension.h build and its header take minutes: the full-form figures are not smoke-tested
        print("full-form figures (torch/extension.h, precompiled header): skipped in smoke mode")
        plain, plain_form = _plain_build_s(light), "light"
    else:
        plain, plain_form = _full_form(problem, full, policy), "full"
    _light(problem, light, plain, plain_form, policy)
    _cached(problem, light.read_text(), policy, repeats, smoke)


def _full_form(problem, path: Path, policy: EvalPolicy) -> float:
    """A full-form (torch/extension.h) candidate: plain load_inline, kernelwright cold, the precompiled header for
    its flags, and a cold build that uses it; the plain build's seconds."""
    from harness.compilation.pch import PrecompiledHeaders
    from harness.isolation.sandbox import Limits

    source = path.read_text()
    assert form(source) == "full", f"{path} does not build against torch/extension.h"
    os.environ["KERNELWRIGHT_PCH"] = "off"  # the header is built explicitly below, and timed
    plain = _plain_build_s(path)
    cold, cold_wall = _timed_evaluation(problem, source, policy)
    headers = PrecompiledHeaders(Path(os.environ["KERNELWRIGHT_BUILD_CACHE"]), Limits(900, 8192, False))
    cflags = cold.build["builds"][0]["cflags"]
    started = time.perf_counter()
    built = headers.build(cflags)
    header_s = time.perf_counter() - started
    os.environ.pop("KERNELWRIGHT_PCH")
    changed = source.replace("#include <torch/extension.h>\n", "#include <torch/extension.h>\n// a new build\n", 1)
    with_header, header_wall = _timed_evaluation(problem, changed, policy)
    used = with_header.build["builds"][0].get("precompiled_header")
    build_plain = cold.build["builds"][0]["seconds"]
    build_pch = with_header.build["builds"][0]["seconds"]
    print(f"full form, flags {cflags.split('-std=')[-1]}")
    print(f"{'plain load_inline, cold build':<34} {plain:6.2f} s (the load_inline call: build and import)")
    print(_row("kernelwright, cold", cold, cold_wall))
    print(f"{'precompiled torch header (once)':<34} {header_s:6.2f} s ({'built' if built else 'FAILED'})")
    print(_row("kernelwright, cold, with header", with_header, header_wall) + f" (header used: {used})")
    print(f"cold build: plain / kernelwright {plain / build_plain:5.2f}x without header, "
          f"{plain / build_pch:5.2f}x with header")
    assert built, "the precompiled header for the full-form candidate's flags failed to build"
    return plain


def _light(problem, path: Path, plain: float, plain_form: str, policy: EvalPolicy) -> None:
    """The light contract (stable ABI headers): the same problem built cold by kernelwright, against plain
    load_inline of its torch/extension.h form (target: >= 5x)."""
    source = path.read_text()
    assert form(source) == "light", f"{path} is not a light-form candidate"
    light, light_wall = _timed_evaluation(problem, source, policy)
    build = light.build["builds"][0]["seconds"]
    print(_row("kernelwright, cold, light contract", light, light_wall))
    print(f"light contract: plain load_inline ({plain_form} form) / kernelwright's cold light build "
          f"{plain / build:5.1f}x ({plain:.1f} s / {build:.1f} s; target >= 5x against the full form)")


def _cached(problem, source: str, policy: EvalPolicy, repeats: int, smoke: bool) -> None:
    """A cached re-evaluation (the build is in the cache) and where its time goes: children forked by the zygote,
    exec'd from scratch (not in a smoke run), and without timing (what a rejected candidate costs)."""
    first = 0.0 if smoke else _timed_evaluation(problem, source, policy)[1]  # a warm-up: the build is cached
    median = _median([_timed_evaluation(problem, source, policy) for _ in range(repeats)])
    checks = 1 if smoke else 5
    judged = _median([_timed_evaluation(problem, source, policy.model_copy(update={"skip_timing": True}))
                      for _ in range(checks)])
    print(_row(f"kernelwright, cached (median of {repeats})", median[0], median[1]) +
          f" ({policy.process_pairs} process sets)")
    if not smoke and policy.process_pairs > 1:  # what the independent process sets cost (issue 32 item 1)
        one_set = _median([_timed_evaluation(problem, source, policy.model_copy(update={"process_pairs": 1}))
                           for _ in range(repeats)])
        print(_row("  the same, one process set", one_set[0], one_set[1]) +
              f" ({median[1] / one_set[1]:.2f}x for {policy.process_pairs} sets)")
    if not smoke:
        os.environ["KERNELWRIGHT_ZYGOTE"] = "off"  # every child exec'd and importing torch, as before the zygote
        try:
            exec_median = _median([_timed_evaluation(problem, source, policy) for _ in range(repeats)])
        finally:
            os.environ.pop("KERNELWRIGHT_ZYGOTE")
        print(_row("  the same, children exec'd (no zygote)", exec_median[0], exec_median[1]) +
              f" ({exec_median[1] / median[1]:.2f}x the zygote's)")
    print(_row(f"cached, no timing (median of {checks})", judged[0], judged[1]) + " (skip_timing: every check "
          "but the timed calls)")
    print(f"cached evaluation {median[1]:.2f} s with a timing budget of {policy.timing_budget_s} s per model "
          f"(target: 0.4 s + the budget)" + ("" if smoke else f"; the first cached one (a warm-up) {first:.2f} s"))


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
    assert form(source) == "full", "the host check's header figures need a torch/extension.h CUDA candidate"
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
    parser.add_argument("--smoke", action="store_true", help="that the script runs: light form only, one repeat, "
                        "a 0.05 s timing budget, no CUDA (seconds; its figures mean nothing)")
    args = parser.parse_args()
    print(HEADING + (" (smoke run: the figures are not measurements)" if args.smoke else ""), flush=True)
    with tempfile.TemporaryDirectory(prefix="kw-bench-") as cache:
        os.environ["KERNELWRIGHT_BUILD_CACHE"] = cache  # a cold cache: the first evaluation compiles
        _cpu(args.problem, 1 if args.smoke else args.repeats, args.smoke)
        if not (args.skip_cuda or args.smoke):
            _cuda()


if __name__ == "__main__":
    main()
