"""Two holes in the static policy, closed (issue 38: the light contract's own header; issue 34: load_inline's
names). PyTorch operators reached through the stable ABI (`torch::stable::amax` from torch/csrc/stable/ops.h, the
header every light-form kernel includes) are PyTorch compute: fatal under `strict`, a note by default, in each
form a model may write them (a namespace alias, a `using`, the C shim, the boxed dispatcher). The presence check
resolves what a called name is bound to: `li(...)` after `load_inline as li` builds a kernel, `tl.load(...)` does
not. Honest controls stay accepted beside each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from harness.verification.static_check import check_candidate
from kernelbench.bundled import find_bundled
from tests.conftest import CPU_CANDIDATES, RELU_CANDIDATE

DEFAULT, STRICT = EvalPolicy(), EvalPolicy(static_policy="strict")
MAX_CANDIDATE = (CPU_CANDIDATES / "level1" / "9_Max_reduction_over_a_dimension.py").read_text()
EXAMPLE = Path(__file__).resolve().parents[3] / "agent" / "examples" / "light_cpu.py"
_BODY = re.compile(r"(Tensor max_dim_forward\(Tensor x, int64_t dim\) \{\n).*?(\n\}\n\nSTABLE)", re.DOTALL)


def max_kernel(body: str, prelude: str = "") -> str:
    """The bundled max-reduction candidate with its C++ function's body replaced (and C++ put before it)."""
    source = _BODY.sub(lambda m: m.group(1) + body + m.group(2), MAX_CANDIDATE)
    return source.replace("using torch::stable::Tensor;", f"using torch::stable::Tensor;\n{prelude}")


def _compute(source: str, policy: EvalPolicy) -> list[tuple[bool, str]]:
    return [(f.fatal, f.message) for f in check_candidate(source, policy).findings if f.check == "torch-compute"]


AMAX = max_kernel("    return torch::stable::amax(x, dim, false);")
RENAMED = {
    "namespace alias": max_kernel("    return ts::amax(x, dim, false);", "namespace ts = torch::stable;"),
    "using directive": max_kernel("    Tensor out = amax(x, dim, false);\n    return out;",
                                  "using namespace torch::stable;"),
    "using declaration": max_kernel("    return sum(x, {dim});", "using torch::stable::sum;"),
    "function pointer": max_kernel("    auto reduce = &torch::stable::amax;\n    return reduce(x, dim, false);"),
    "C shim": max_kernel("    AtenTensorHandle ret = nullptr;\n"
                         "    aoti_torch_aten_amax(x.get(), &dim, 1, false, &ret);\n    return Tensor(ret);"),
    "dispatcher": max_kernel('    StableIValue stack[3];\n    aoti_torch_call_dispatcher("aten::amax", "", stack);\n'
                             "    return Tensor(nullptr);"),
}


def test_a_stable_abi_operator_is_pytorch_compute_fatal_when_strict_and_a_note_by_default() -> None:
    strict = check_candidate(AMAX, STRICT)
    assert strict.verdict == "rejected" and _compute(AMAX, STRICT)[0][0] is True
    assert "torch::stable::amax" in _compute(AMAX, STRICT)[0][1]
    default = check_candidate(AMAX, DEFAULT)
    assert default.verdict is None and _compute(AMAX, DEFAULT) and not _compute(AMAX, DEFAULT)[0][0]
    assert any("torch::stable::amax" in note for note in default.notes)


@pytest.mark.parametrize("form", sorted(RENAMED))
def test_the_same_operator_under_another_name_is_pytorch_compute_too(form: str) -> None:
    found = _compute(RENAMED[form], STRICT)
    assert found and found[0][0], (form, check_candidate(RENAMED[form], STRICT).findings)
    assert check_candidate(RENAMED[form], STRICT).verdict == "rejected"


HONEST = {
    "the bundled max reduction": MAX_CANDIDATE,
    "the light example": EXAMPLE.read_text(),
    "its own helper named sum beside a using directive": max_kernel(
        "    Tensor out = empty_like(x);\n    float total = sum(out.const_data_ptr<float>(), out.numel());\n"
        "    return out;",
        "using namespace torch::stable;\nstatic float sum(const float* p, int64_t n) {\n    float s = 0.0f;\n"
        "    for (int64_t i = 0; i < n; ++i) s += p[i];\n    return s;\n}"),
    "locals named like operators beside a using directive": max_kernel(
        "    float sum = 0.0f;\n    float mean = sum / 2;\n    Tensor out = new_empty(x, {1});\n    return out;",
        "using namespace torch::stable;"),
    "std::max and layout helpers (clone is no syscall here)": max_kernel(
        "    Tensor t = torch::stable::transpose(torch::stable::contiguous(x), 0, 1);\n"
        "    float m = std::max(1.0f, 2.0f);\n    return torch::stable::clone(t);"),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_stable_abi_code_is_not_pytorch_compute(name: str) -> None:
    assert _compute(HONEST[name], STRICT) == []
    assert check_candidate(HONEST[name], STRICT).verdict is None


def test_strict_evaluation_rejects_the_stable_amax_before_building() -> None:
    evaluation = evaluate(find_bundled("level1/9_Max_reduction_over_a_dimension"), AMAX, "cpu", STRICT)
    assert evaluation.verdict is Verdict.REJECTED
    assert any(r.startswith("[torch-compute]") and "torch::stable::amax" in r for r in evaluation.reasons)


RELU = RELU_CANDIDATE.read_text()
_IMPORT = "from torch.utils.cpp_extension import load_inline\n"
_CALL = "\nload_inline("
assert _IMPORT in RELU and _CALL in RELU


def relu_built_with(imports: str, call: str) -> str:
    """The bundled ReLU candidate with its import of load_inline and its call's name replaced."""
    return RELU.replace(_IMPORT, imports).replace(_CALL, f"\n{call}(")


BUILDS = {
    "from-import alias": relu_built_with("from torch.utils.cpp_extension import load_inline as li\n", "li"),
    "module alias": relu_built_with("import torch.utils.cpp_extension as ce\n", "ce.load_inline"),
    "from-import of the module": relu_built_with("from torch.utils import cpp_extension as ext\n", "ext.load_inline"),
    "full path": relu_built_with("import torch.utils.cpp_extension\n", "torch.utils.cpp_extension.load_inline"),
    "assigned name": relu_built_with("import torch.utils.cpp_extension as ce\nbuild = ce.load_inline\n", "build"),
    "the original": RELU,
}
NOT_BUILDS = {
    "triton's load": relu_built_with("import triton.language as tl\n", "tl.load"),
    "json's load": relu_built_with("from json import load\n", "load"),
    "a local function named load_inline": relu_built_with(
        "from torch.utils.cpp_extension import load_inline\n\n\ndef load_inline(**kwargs):\n    return None\n",
        "load_inline"),
    "an unbound name": relu_built_with("", "load_inline"),
    "another module's load_inline": relu_built_with("from mylib import load_inline\n", "load_inline"),
}
ESCAPES = {"the clone syscall": "    ::clone(nullptr, nullptr, 0, nullptr);", "std::system": '    std::system("ls");'}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_a_process_escape_is_still_io_beside_the_stable_clone(name: str) -> None:
    source = max_kernel(ESCAPES[name] + "\n    return torch::stable::clone(x);")
    assert any(f.check == "io" and f.fatal for f in check_candidate(source, DEFAULT).findings)


def _no_kernel(source: str) -> bool:
    return any(f.check == "no-kernel" and f.fatal for f in check_candidate(source, DEFAULT).findings)


@pytest.mark.parametrize("form", sorted(BUILDS))
def test_load_inline_under_any_name_bound_to_it_counts_as_a_build(form: str) -> None:
    assert not _no_kernel(BUILDS[form]), check_candidate(BUILDS[form], DEFAULT).findings


@pytest.mark.parametrize("form", sorted(NOT_BUILDS))
def test_a_call_named_load_that_is_not_torchs_is_no_build(form: str) -> None:
    assert _no_kernel(NOT_BUILDS[form])


THREADS_UNDER_OTHER_NAMES = {
    "using-directive": "using namespace std;\nvoid f(){ thread t([]{}); t.detach(); }",
    "using-declaration": "using std::thread;\nvoid f(){ thread worker{[]{}}; worker.join(); }",
    "async": "using namespace std;\nvoid f(){ auto r = async(launch::async, []{ return 1; }); }",
    "namespace-alias": "namespace s = std;\nvoid f(){ s::thread t([]{}); t.join(); }",
}
NOT_THREADS = {
    "a variable named threads": "using namespace std;\nint threads = 4;\nvoid f(int thread_id){ }",
    "CUDA's threadIdx": "__global__ void k(float* x){ int i = threadIdx.x; x[i] = 0; }",
    "a function named thread, no std": "int thread(int x){ return x; }\nvoid f(){ thread(3); }",
}


@pytest.mark.parametrize("form", sorted(THREADS_UNDER_OTHER_NAMES))
def test_threads_started_under_the_names_a_using_brings_in_are_found(form: str) -> None:
    from harness.verification.source_scan import scan_cpp

    assert any(f.check == "threads" for f in scan_cpp(THREADS_UNDER_OTHER_NAMES[form], strict=False))


@pytest.mark.parametrize("form", sorted(NOT_THREADS))
def test_code_that_only_says_thread_is_not_a_thread(form: str) -> None:
    from harness.verification.source_scan import scan_cpp

    assert not any(f.check == "threads" for f in scan_cpp(NOT_THREADS[form], strict=False))
