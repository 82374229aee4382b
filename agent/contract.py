"""What the coder is told before it writes a line: the build contract (the stable ABI, with two complete examples
per device), how a kernel is judged, and the rules. Every number and every rule here is read from the policy the
run uses (harness/policy.py) and states what the harness does: what is rejected at every level, what `default`
only reports and `strict` rejects (harness/verification/static_check.py), the tolerances and norm-wise check
(harness/verification/compare.py), the input distributions (harness/values/distributions.py)."""

from __future__ import annotations

from pathlib import Path

from harness.policy import EvalPolicy
from harness.values.distributions import DISTRIBUTIONS

EXAMPLES = Path(__file__).with_name("examples")

_LIGHT = ("Build against torch's stable ABI headers, as in the example below: `torch/csrc/stable/library.h`, "
          "`tensor.h`, `ops.h` (no `torch/extension.h`), the op declared with `STABLE_TORCH_LIBRARY(<ns>, m)` and "
          "implemented with `STABLE_TORCH_LIBRARY_IMPL(<ns>, {key}, m)` and `TORCH_BOX`, built with "
          "`load_inline(..., is_python_module=False, no_implicit_headers=True)` and "
          "`-DTORCH_TARGET_VERSION=0x020d000000000000`, and called as `torch.ops.<ns>.<op>(...)` in forward. It "
          "builds in seconds (torch/extension.h costs 20-120 s per build on the CPU, minutes with nvcc): use "
          "torch/extension.h only for an API the stable headers lack. Use a namespace of your own for each attempt.")
_DEVICE = {
    "cpu": "Target: the CPU. Write the kernel in C++ in cpp_sources. ",
    "cuda": ("Target: an NVIDIA GPU. Write CUDA C++ kernels in cuda_sources and launch them on the current stream "
             "(torch::stable::accelerator::getCurrentStream(device_index).nativeHandle()). "),
}
STABLE_REFERENCE = """The stable ABI in brief (namespace torch::stable; no at::, c10:: or torch/extension.h API):
- Tensor: mutable_data_ptr<float>(), const_data_ptr<float>(), data_ptr() (a void*), numel(), dim(), size(d),
  stride(d), sizes(), is_contiguous(), scalar_type() (torch::headeronly::ScalarType::Float, ...), is_cuda(),
  get_device_index().
- Allocation and layout (ops.h): empty_like(t), new_empty(t, shape) for an output of another shape (shape a
  std::vector<int64_t>), new_zeros(t, shape), contiguous(t), reshape(t, shape), view(t, shape),
  transpose(t, d0, d1). Its compute operators (amax, sum, matmul, subtract) are PyTorch compute, not your kernel.
- Checks: STD_TORCH_CHECK(condition, "message"). These do not exist here and fail to build: TORCH_CHECK,
  AT_DISPATCH_*, x.options(), data_ptr<float>(), torch::empty, load_inline(functions=[...]).
- Schema types in m.def: Tensor -> torch::stable::Tensor, int -> int64_t, float -> double, bool -> bool,
  int[] -> std::vector<int64_t>, Tensor? -> std::optional<torch::stable::Tensor>."""


_DIRECTIONS = {
    "cpu": ("Make the innermost loop contiguous and branch-free so that -O3 vectorizes it; restructure the "
            "loop nest or the memory layout for that.",
            "Block the computation for the caches: work on tiles that fit in L1/L2 and reuse each one fully.",
            "Fuse everything forward computes into a single pass over memory, with no intermediate tensors.",
            "Unroll with several independent accumulators to hide the latency of dependent operations."),
    "cuda": ("Start with one thread per output element and coalesced loads; get it correct and launch-cheap.",
             "Tile through shared memory so each global load is reused by many threads.",
             "Use vectorized memory access (float4) and enough work per thread to saturate DRAM bandwidth.",
             "Use warp-level primitives (__shfl_down_sync) for reductions, with one block per row or tile.",
             "Fuse everything forward computes into one kernel, with no intermediate tensors in global memory."),
}


TUNING = """Tunable constants (optional): a module-level literal `TUNE = {"BLOCK": [64, 32, 128]}` declares
compile-time constants to try (at most 4 names, 8 values each, numbers or short identifiers; the FIRST value is the
default your file uses).
Read each from the first value, e.g. `extra_cflags=[...] + [f"-D{k}={v[0]}" for k, v in TUNE.items()]`, and
use the names in your C++ as constants. The harness builds and screens variants with each list pinned to one
value (no extra reply from you) and keeps the fastest correct one; you see the table next round."""


def direction(device: str, slot: int) -> str | None:
    """A different approach for each best-of-N slot of a first round (slot 0: none, the model's own choice)."""
    options = _DIRECTIONS["cpu" if device == "cpu" else "cuda"]
    return None if slot == 0 else options[(slot - 1) % len(options)]


# The worked examples, each with the calls of a problem whose answer it is: a problem that makes one of them is
# shown the other example (an example must never be the answer, nor a near copy of it)
_EXAMPLES = (("a weighted sum over one dimension (an int argument, a weight, an output of another shape)",
              "weighted_sum", ("sum", "mean")),
             ("ReLU (one tensor in, the same shape out)", "light", ("relu", "clamp")))


def example_files(device: str) -> list[tuple[str, str]]:
    """(name, file text) of every worked example for `device`."""
    key = "cpu" if device == "cpu" else "cuda"
    return [(name, (EXAMPLES / f"{stem}_{key}.py").read_text().strip()) for name, stem, _ in _EXAMPLES]


def _calls(problem_source: str) -> set[str]:
    """The names Model calls (torch.relu, F.relu, x.sum, nn.ReLU ...), lower case."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(problem_source)):
        if isinstance(node, ast.Call):
            func = node.func
            names.add((func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")).lower())
    return names


def chosen_example(device: str, problem_source: str | None, has_values: bool) -> tuple[str, str]:
    """The one worked example a prompt shows: never one whose answer the problem is (its calls name the example's
    operation); of the others, the weighted sum for a problem with parameters or attributes, else the ReLU."""
    calls = _calls(problem_source) if problem_source else set()
    files = dict((stem, text) for (_, stem, _), (_, text) in zip(_EXAMPLES, example_files(device)))
    allowed = [(name, stem) for name, stem, ops in _EXAMPLES if not any(op in c for op in ops for c in calls)]
    allowed.sort(key=lambda e: (e[1] == "weighted_sum") != has_values)
    name, stem = (allowed or [(_EXAMPLES[0][0], _EXAMPLES[0][1])])[0]
    return name, files[stem]


def device_contract(device: str, problem_source: str | None = None, has_values: bool = False) -> str:
    """The device's build contract, the stable ABI's reference, and one complete example that is not the problem's
    answer."""
    key = "cpu" if device == "cpu" else "cuda"
    name, text = chosen_example(device, problem_source, has_values)
    return (f"{_DEVICE[key]}{_LIGHT.format(key=key.upper())}\n{STABLE_REFERENCE}\nExample ({name}):\n```python\n"
            f"{text}\n```\n{TUNING}")


def kernel_contract(device: str, values: str, problem_source: str | None = None, has_values: bool = False) -> str:
    """The kernel-only contract: the model writes the C++ op; the harness writes the Python file around it."""
    key = "cpu" if device == "cpu" else "cuda"
    name, text = chosen_example(device, problem_source, has_values)
    cpp = text.split('r"""', 1)[1].split('"""', 1)[0].strip() if 'r"""' in text else text
    return (f"{_DEVICE[key]}Write only the C++ op; the harness writes the Python file: its ModelNew creates "
            "Model's parameters with Model's own __init__ and its forward calls torch.ops.<ns>.<op>(...) with the "
            f"values your op's schema names. Name each argument after one of these values: {values}. "
            f"{_LIGHT.format(key=key.upper()).split(', built with', 1)[0]}.\n{STABLE_REFERENCE}\n"
            f"Example ({name}), the C++ op only:\n```cpp\n{cpp}\n```")


KERNEL_REPLY = ("Reply with your reasoning, then the whole C++ source (includes, the function, STABLE_TORCH_LIBRARY "
                "and STABLE_TORCH_LIBRARY_IMPL) in one ```cpp code block.")


def judging(device: str, policy: EvalPolicy) -> str:
    """How a kernel is judged, as the harness does it under `policy`."""
    timing = (f"reference and kernel each run in their own process with {policy.cpu_threads} thread(s) "
              f"(OMP_NUM_THREADS={policy.cpu_threads}) on the same CPUs: make the single-thread code fast "
              "(contiguous inner loops that -O3 vectorizes, cache blocking). OpenMP pragmas are allowed (with "
              "-fopenmp in extra_cflags and extra_ldflags)" + (", but gain nothing at one thread" if
                                                                 policy.cpu_threads == 1 else "")
              if device == "cpu" else
              "CUDA events around each call, with the L2 cache flushed before it and the inputs already on the "
              "device: every call reads its inputs from DRAM")
    knockout = (" forward must depend on your kernel: a trial is re-run with your kernel disabled and must then "
                "fail." if policy.knockout else "")
    return f"""How your kernel is judged (by a harness you cannot see or change):
- Correctness: {policy.trials} trials with fresh seeds, the inputs of get_inputs()'s shapes redrawn from
  {len(DISTRIBUTIONS)} distributions: the problem's own, uniform (over 4x the problem's range, signed where the
  reference allows), heavy-tailed, spiky (mostly near zero, a few large spikes), large (magnitudes up to 1000, or
  the largest the reference handles, in its domain), block-scaled, sorted, and sparse (the problem's own values
  with a few huge spikes at random places): an unguarded exp() overflows, so subtract the max in a softmax and keep
  softplus's threshold; be right wherever the reference is defined, not only on the problem's own range; read every
  input element: a sample of it misses the spikes. The model's parameters are redrawn after construction (same
  names and shapes as Model's): read them in forward, assume nothing of their init values.
- Tolerance: every output element within atol + rtol * |expected|, rtol = {policy.atol_fp32:g} for float32
  ({policy.atol_half:g} for float16/bfloat16) and atol = rtol * max(1, rms of the expected output); and the
  norm-wise relative error ||got - expected|| / ||expected|| under rtol too. NaN and inf must match the
  reference's, position by position. Outputs: the same shape and dtype, fresh tensors that do not alias the
  inputs; the inputs must be left unchanged.
- Every call counts: timed calls get newly drawn input values each time and their outputs are checked, so compute
  from the current inputs (no caching across calls, no work left running after forward returns).{knockout}
- Timing: {timing}. Speedup = the reference's median time / your kernel's median time."""


def rules(policy: EvalPolicy, contract: str = "file") -> str:
    """The static rules, with what this run's policy level does about each (`contract` "kernel": the model writes
    the C++ op only)."""
    reported = ("rejected under this run's `strict` policy" if policy.static_policy == "strict" else
                "reported beside the verdict under this run's `default` policy (the speedup is then not your "
                "kernel's alone) and rejected under `strict`")
    kernel = ("- Build at least one kernel of your own with load_inline (or load) and call it in forward; a file "
              "that builds none is rejected.\n" if policy.require_custom_kernel else "")
    what = ("- One C++ op that returns the same output as Model's forward (shape, dtype, values), its schema's "
            "arguments named\n  after the values listed above.\n" if contract == "kernel" else
            """- A complete Python file with `class ModelNew(nn.Module)` taking the same constructor arguments as `Model`,
  whose `forward` takes the same inputs and returns the same outputs (shape, dtype, values). Create parameters
  exactly as `Model` does (same modules and parameters, in the same order) so the weights match.
""" + kernel)
    return f"""Rules:
{what}- Rejected at every policy level: try/except fallbacks, threads or processes you start (std::thread,
  pthread, std::async, threading, multiprocessing; OpenMP pragmas are not that), CUDA streams of your own,
  reading files, network or environment access, monkeypatching, introspection, fast-math flags (-ffast-math,
  --use_fast_math).
- The answer computed by PyTorch instead of your kernel (torch/F operators, tensor methods or tensor arithmetic
  in forward; at::, torch:: or torch::stable:: operators such as amax, sum, matmul in C++; cuBLAS, cuDNN,
  CUTLASS), lower precision than the reference (half, bfloat16, TF32), and state kept across calls (globals, a
  cache keyed by the inputs): {reported}. Shape and allocation calls (view, reshape, empty_like, new_empty,
  contiguous) are fine."""


REPLY_FILE = "Reply with your reasoning, then the whole file in one ```python code block."


_COPY = 0.95  # the share of tokens a candidate shares with an example (in order) that makes it a copy: the
# 0.5B's copies measure 0.99-1.0, the example with a renamed op and an added check 0.96-0.98; the bundled ReLU
# candidate, which the example was cut from, 0.92
EXAMPLE_NOTE = "[example] this kernel is the contract's worked example"


def _tokens(source: str) -> list[str]:
    """A file's tokens with comments, spacing and the names a copy changes (op namespaces, kw_*) taken out."""
    import re

    source = re.sub(r"//[^\n]*|#(?!pragma|include)[^\n]*", "", source)
    return ["NAME" if t.startswith("kw_") else t for t in re.findall(r"\w+|[^\w\s]", source)]


def example_copy(source: str) -> str | None:
    """The worked example `source` is, with trivial edits (names, comments, spacing, a line or two), or None:
    such a candidate measures the contract's example, not a kernel the run found."""
    from difflib import SequenceMatcher

    mine = _tokens(source)
    for device in ("cpu", "cuda"):
        for name, text in example_files(device):
            theirs = _tokens(text)
            matcher = SequenceMatcher(None, mine, theirs, autojunk=False)
            if matcher.ratio() >= _COPY:
                return name.split(" (")[0]
    return None
